#include "fp4emu/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include <fmt/format.h>

#include "fp4emu/error.hpp"

namespace fp4emu::io {

namespace fs = std::filesystem;

namespace {

fs::path directory_of(const fs::path& path) {
  fs::path dir = path.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

std::string reason(int err, const fs::path& path) {
  const fs::path dir = directory_of(path);
  std::error_code ec;
  switch (err) {
    case ENOENT:
      if (!fs::exists(dir, ec)) {
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
    case ENOSPC:
    case EDQUOT:
      return fmt::format("{}; free some space or choose another location", std::strerror(err));
    case EFBIG:
      return "the file would exceed the file-size limit (`ulimit -f`) or the largest file the "
             "file system holds; raise the limit or choose another location";
    case ELOOP:
      return "too many levels of symbolic links; check the links";
    case EBADF:
      return "the file descriptor it names is not open";
    default:
      break;
  }
  return std::strerror(err);
}

[[noreturn]] void fail(const fs::path& path, const char* step, int err) {
  throw InputError(
      fmt::format("cannot write '{}': {} failed: {}", path.string(), step, reason(err, path)));
}

std::string random_suffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", r);
}

// The whole of `s` as a non-negative int, or nothing.
std::optional<int> whole_int(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// N for a name of this process's descriptor N: /dev/fd/N, /proc/self/fd/N,
// /proc/<pid>/fd/N.
std::optional<int> descriptor_number(const fs::path& p) {
  const std::string s = p.lexically_normal().string();
  for (const std::string& prefix :
       {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
        fmt::format("/proc/{}/fd/", ::getpid())}) {
    if (s.size() > prefix.size() && s.compare(0, prefix.size(), prefix) == 0)
      return whole_int(std::string_view(s).substr(prefix.size()));
  }
  return std::nullopt;
}

// Where the bytes for a destination go.
struct Destination {
  enum class Kind {
    file,        // a (possibly new) file: temporary + rename over `file`
    descriptor,  // an open descriptor of this process: written through a dup of it
    in_place,    // a device, FIFO or socket: `file` opened and written directly
  };
  Kind kind = Kind::file;
  fs::path file;
  int descriptor = -1;
};

Destination resolve(const fs::path& path) {
  if (path == "-") return {Destination::Kind::descriptor, {}, STDOUT_FILENO};
  fs::path p = path;
  // Follow symbolic links one at a time: /dev/stdout is a link to
  // /proc/self/fd/1, whose own target is not a path to rename over.
  constexpr int kMaxLinks = 40;  // Linux's own limit
  for (int hop = 0;; ++hop) {
    if (const auto fd = descriptor_number(p)) return {Destination::Kind::descriptor, {}, *fd};
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    if (hop == kMaxLinks) fail(path, "following symbolic links", ELOOP);
    std::error_code ec;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) fail(path, "reading a symbolic link", ec.value());
    p = link.is_absolute() ? link : directory_of(p) / link;
  }
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return {Destination::Kind::in_place, p, -1};
  return {Destination::Kind::file, p, -1};  // a directory is refused by the callers
}

// A write past the file-size limit (ulimit -f) raises SIGXFSZ, whose default
// action kills the process without a word. Ignored, the write fails with
// EFBIG and is reported like any other error. Done once, and only when no
// one installed a handler of their own.
void ignore_file_size_signal() {
  static const bool done = [] {
    struct sigaction old {};
    if (::sigaction(SIGXFSZ, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO))
      ::signal(SIGXFSZ, SIG_IGN);
    return true;
  }();
  (void)done;
}

bool process_exists(int pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// Temporaries of the file `target` (links already resolved).
void remove_stale_temporaries_of(const fs::path& target) {
  const std::string name = target.filename().string();
  if (name.empty()) return;
  const std::string tmp_file = name + ".tmp.";                  // + <pid>.<hex>
  const std::string tmp_golden = "." + name + ".tmp-golden-";  // + <pid>
  const std::string old_golden = "." + name + ".old-golden-";  // + <pid>
  const auto starts = [](std::string_view s, std::string_view prefix) {
    return s.size() > prefix.size() && s.substr(0, prefix.size()) == prefix;
  };
  std::error_code ec;
  for (fs::directory_iterator it(directory_of(target), fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    const fs::file_status st = it->symlink_status(ec);
    if (ec) {
      ec.clear();
      continue;
    }
    std::error_code ignored;
    if (starts(entry, tmp_file) && fs::is_regular_file(st)) {
      const std::string_view rest = std::string_view(entry).substr(tmp_file.size());
      const size_t dot = rest.find('.');
      const auto pid = dot == std::string_view::npos ? std::nullopt : whole_int(rest.substr(0, dot));
      const std::string_view hex = dot == std::string_view::npos ? "" : rest.substr(dot + 1);
      const bool is_hex = !hex.empty() && hex.find_first_not_of("0123456789abcdef") == std::string_view::npos;
      if (pid && is_hex && !process_exists(*pid)) fs::remove(it->path(), ignored);
    } else if (starts(entry, tmp_golden) && fs::is_directory(st)) {
      const auto pid = whole_int(std::string_view(entry).substr(tmp_golden.size()));
      if (pid && !process_exists(*pid)) fs::remove_all(it->path(), ignored);
    } else if (starts(entry, old_golden) && fs::is_directory(st)) {
      const auto pid = whole_int(std::string_view(entry).substr(old_golden.size()));
      if (pid && !process_exists(*pid) && fs::exists(target, ignored)) fs::remove_all(it->path(), ignored);
    }
  }
}

}  // namespace

void remove_stale_temporaries(const fs::path& target) {
  const Destination d = resolve(target);
  if (d.kind == Destination::Kind::file) remove_stale_temporaries_of(d.file);
}

AtomicFileWriter::AtomicFileWriter(const fs::path& path) : path_(path) {
  if (path.empty() || (!path.has_filename() && path != "-")) {
    throw InputError(fmt::format("cannot write '{}': the path names no file", path.string()));
  }
  ignore_file_size_signal();
  const Destination d = resolve(path);
  switch (d.kind) {
    case Destination::Kind::descriptor:
      // Buffered output already sent to that descriptor goes first.
      std::fflush(nullptr);
      fd_ = ::fcntl(d.descriptor, F_DUPFD_CLOEXEC, 0);
      if (fd_ < 0) fail(path_, "using the file descriptor", errno);
      return;
    case Destination::Kind::in_place:
      target_ = d.file;
      fd_ = ::open(target_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd_ < 0) fail(path_, "opening the destination", errno);
      return;
    case Destination::Kind::file:
      break;
  }
  target_ = d.file;
  std::error_code ec;
  if (fs::is_directory(target_, ec)) fail(path_, "opening the destination", EISDIR);
  remove_stale_temporaries_of(target_);
  tmp_ = (directory_of(target_) /
          fmt::format("{}.tmp.{}.{}", target_.filename().string(), ::getpid(), random_suffix()))
             .string();
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    tmp_.clear();
    fail(path_, "creating a temporary file", errno);
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
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
  if (tmp_.empty()) {  // written in place: nothing to sync or rename
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && errno != EINTR) fail(path_, "close", errno);
    committed_ = true;
    return;
  }
  if (::fsync(fd_) != 0) fail(path_, "fsync", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(path_, "close", errno);
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0) fail(path_, "rename into place", errno);
  committed_ = true;

  // Make the rename itself durable. Best effort: some file systems refuse to
  // fsync a directory, and the data is already in place.
  const int dfd = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void check_output_path(const fs::path& path, std::string_view label) {
  if (path.empty() || (!path.has_filename() && path != "-"))
    throw InputError(fmt::format("{} '{}': the path names no file", label, path.string()));
  const Destination d = resolve(path);
  if (d.kind != Destination::Kind::file) return;
  std::error_code ec;
  if (fs::is_directory(d.file, ec))
    throw InputError(fmt::format("{} '{}' is a directory; give a file name", label, path.string()));
  const fs::path dir = directory_of(d.file);
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("{} '{}': directory '{}' does not exist; create it first", label, path.string(),
                                 dir.string()));
}

void write_file_atomic(const fs::path& path, std::span<const uint8_t> bytes) {
  AtomicFileWriter out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace fp4emu::io
