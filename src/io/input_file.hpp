#pragma once
// Private to src/io: a read-only file with a known size and bounds-checked
// positional reads. Readers check every header-derived size against size()
// before allocating, so a malicious header cannot make them allocate more
// than the file holds.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace fp4emu::io::detail {

// "it is a directory", "it is a FIFO", ... for a message about st_mode.
std::string_view file_kind(mode_t mode);

class InputFile {
 public:
  // Throws InputError naming the path if it cannot be opened or is not a
  // regular file.
  explicit InputFile(const std::filesystem::path& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }

  // Reads exactly n bytes at offset; InputError if the range is outside the
  // file or the read fails.
  void read(uint64_t offset, void* dst, size_t n) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string name_;
};

}  // namespace fp4emu::io::detail
