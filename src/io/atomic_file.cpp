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

std::string random_suffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", r);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::filesystem::path& path) : path_(path) {
  if (path.empty() || !path.has_filename()) {
    throw InputError(fmt::format("cannot write '{}': the path names no file", path.string()));
  }
  tmp_ = (directory_of(path) /
          fmt::format("{}.tmp.{}.{}", path.filename().string(), ::getpid(), random_suffix()))
             .string();
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) fail(path_, "creating a temporary file", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(std::span<const uint8_t> bytes) {
  if (fd_ < 0) {
    throw InputError(fmt::format("cannot write '{}': the file was already committed",
                                 path_.string()));
  }
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path_, "write", errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) {
    throw InputError(fmt::format("cannot write '{}': the file was already committed",
                                 path_.string()));
  }
  if (::fsync(fd_) != 0) fail(path_, "fsync", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(path_, "close", errno);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail(path_, "rename into place", errno);
  committed_ = true;

  // Make the rename itself durable. Best effort: some file systems refuse to
  // fsync a directory, and the data is already in place.
  const int dfd = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void check_output_path(const std::filesystem::path& path, std::string_view label) {
  std::error_code ec;
  if (path.empty() || !path.has_filename())
    throw InputError(fmt::format("{} '{}': the path names no file", label, path.string()));
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("{} '{}' is a directory; give a file name", label, path.string()));
  const std::filesystem::path dir = directory_of(path);
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(fmt::format("{} '{}': directory '{}' does not exist; create it first", label, path.string(),
                                 dir.string()));
}

void write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  AtomicFileWriter out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace fp4emu::io
