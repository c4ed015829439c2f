#include "input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/read_file.hpp"

namespace fp4emu::io::detail {

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "it is a directory";
  if (S_ISFIFO(mode)) return "it is a FIFO";
  if (S_ISCHR(mode)) return "it is a character device";
  if (S_ISBLK(mode)) return "it is a block device";
  if (S_ISSOCK(mode)) return "it is a socket";
  return "it is not a plain file";
}

InputFile::InputFile(const std::filesystem::path& path) : name_(path.string()) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever, before the regular-file check below could refuse it. It has no
  // effect on reads of a regular file.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw InputError(fmt::format("cannot open '{}': {}{}", name_, std::strerror(err),
                                 err == ENOENT ? " (check the path)" : ""));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw InputError(fmt::format("cannot stat '{}': {}", name_, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw InputError(fmt::format("'{}' is not a regular file ({}); give the path of a file",
                                 name_, file_kind(st.st_mode)));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    throw InputError(fmt::format("'{}': read of {} bytes at offset {} is past the end of the "
                                 "file ({} bytes); the file is truncated",
                                 name_, n, offset, size_));
  }
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("'{}': read failed at offset {}: {}", name_, offset,
                                   std::strerror(errno)));
    }
    if (got == 0) {
      throw InputError(fmt::format("'{}': unexpected end of file at offset {} (the file "
                                   "shrank while being read?)",
                                   name_, offset));
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

}  // namespace fp4emu::io::detail

namespace fp4emu::io {

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  const detail::InputFile f(path);
  std::vector<uint8_t> bytes(static_cast<size_t>(f.size()));
  f.read(0, bytes.data(), bytes.size());
  return bytes;
}

}  // namespace fp4emu::io
