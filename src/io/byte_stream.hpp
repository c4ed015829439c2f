#pragma once
// Values to bytes and back, in the order written: how the CLI's MPI layer
// (tools/fp4emu/distributed.hpp) and golden generate's case exchange carry
// results between the ranks of a job. Trivially copyable values go as their
// bytes (every rank runs the same binary on the same kind of machine);
// strings, vectors and maps as a count and their items.
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace fp4emu::io {

class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "put() copies bytes; encode this type's fields");
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put(const std::string& s) {
    put<uint64_t>(s.size());
    bytes_ += s;
  }
  template <class T>
  void put(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    if constexpr (std::is_trivially_copyable_v<T>) {
      bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    } else {
      for (const T& x : v) put(x);
    }
  }
  template <class K, class V>
  void put(const std::map<K, V>& m) {
    put<uint64_t>(m.size());
    for (const auto& [k, v] : m) put(k), put(v);
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& bytes) : bytes_(bytes) {}
  template <class T>
  void get(T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      const uint64_t n = count();
      v.assign(take(n), n);
    } else {
      static_assert(std::is_trivially_copyable_v<T>, "get() copies bytes; decode this type's fields");
      std::memcpy(&v, take(sizeof v), sizeof v);
    }
  }
  template <class T>
  void get(std::vector<T>& v) {
    v.resize(count());
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (!v.empty()) std::memcpy(v.data(), take(v.size() * sizeof(T)), v.size() * sizeof(T));
    } else {
      for (T& x : v) get(x);
    }
  }
  template <class K, class V>
  void get(std::map<K, V>& m) {
    m.clear();
    for (uint64_t n = count(); n > 0; --n) {
      K k;
      V x;
      get(k), get(x);
      m.emplace(std::move(k), std::move(x));
    }
  }
  template <class T>
  T get() {
    T v{};
    get(v);
    return v;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  uint64_t count() {
    uint64_t n = 0;
    get(n);
    return n;
  }
  const char* take(size_t n) {
    if (n > bytes_.size() - at_) throw std::logic_error("io::ByteReader: the bytes end inside a value (written with another layout)");
    const char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  const std::string& bytes_;
  size_t at_ = 0;
};


}  // namespace fp4emu::io
