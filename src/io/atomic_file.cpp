#include "fp4emu/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include <fmt/format.h>

#include "fp4emu/error.hpp"

namespace fp4emu::io {

namespace {

std::filesystem::path directory_of(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

std::string reason(int err, const std::filesystem::path& path) {
  const std::filesystem::path dir = directory_of(path);
  std::error_code ec;
  switch (err) {
    case ENOENT:
      if (!std::filesystem::exists(dir, ec)) {
        return fmt::format("directory '{}' does not exist; create it first", dir.string());
      }
      break;
    case ENOTDIR:
      return fmt::format("'{}' is not a directory", dir.string());
    case EACCES:
    case EPERM:
    case EROFS:
      return fmt::format("{}; choose a writable location", std::strerror(err));
    case EISDIR:
      return "the destination is a directory; give a file name";
    default:
      break;
  }
  return std::strerror(err);
}

[[noreturn]] void fail(const std::filesystem::path& path, const char* step, int err) {
  throw InputError(
      fmt::format("cannot write '{}': {} failed: {}", path.string(), step, reason(err, path)));
}

// Removes the temporary unless released (i.e. renamed into place).
class TempGuard {
 public:
  TempGuard(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  ~TempGuard() {
    if (fd_ >= 0) ::close(fd_);
    if (!name_.empty()) ::unlink(name_.c_str());
  }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;
  int close_fd() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void release() { name_.clear(); }

 private:
  int fd_;
  std::string name_;
};

std::string random_suffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", r);
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  if (path.empty() || !path.has_filename()) {
    throw InputError(fmt::format("cannot write '{}': the path names no file", path.string()));
  }
  const std::filesystem::path dir = directory_of(path);
  const std::string tmp =
      (dir / fmt::format("{}.tmp.{}.{}", path.filename().string(), ::getpid(), random_suffix()))
          .string();

  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(path, "creating a temporary file", errno);
  TempGuard guard(fd, tmp);

  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write", errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail(path, "fsync", errno);
  if (guard.close_fd() != 0) fail(path, "close", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, "rename into place", errno);
  guard.release();

  // Make the rename itself durable. Best effort: some file systems refuse to
  // fsync a directory, and the data is already in place.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace fp4emu::io
