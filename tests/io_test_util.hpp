#pragma once
// Helpers shared by the file-format tests: raw file bytes and the
// "this input is rejected with a message naming ..." check.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>

#include "fp4emu/error.hpp"

namespace fp4emu::testing {

inline void write_bytes(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Runs fn, expects an InputError whose message contains every needle.
inline void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string_view> needles) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (std::string_view n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks \"" << n << "\": " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
}

}  // namespace fp4emu::testing
