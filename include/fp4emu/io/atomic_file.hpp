#pragma once
// Output files are written whole or not at all (DESIGN.md §5): the bytes go
// to "<path>.tmp.<pid>.<random>" in the destination's directory, are fsynced,
// and the temporary is renamed over <path>. A reader sees the old file or the
// complete new one, never a partial write; a failed run leaves nothing behind.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace fp4emu::io {

// Writes `bytes` to `path` atomically, replacing any existing file. On any
// failure the temporary is removed and InputError is thrown naming `path`
// and the reason (missing directory, permission denied, disk full, path is a
// directory, ...).
void write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes);

// Checks, before a long run, that `path` can be an output: its directory
// exists and it is not itself a directory. InputError naming `label` (the
// option, e.g. "--json") and the path otherwise. The write itself can still
// fail later (permissions, disk full) and then reports as above.
void check_output_path(const std::filesystem::path& path, std::string_view label);

// The same, streamed: for outputs too large to hold in memory (a generated
// activation dump). The temporary is created by the constructor, filled by
// write(), and renamed into place by commit(); destroying the writer without
// commit() (an exception, a failed check) removes the temporary. Errors are
// InputErrors naming `path`, as for write_file_atomic.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::filesystem::path& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::span<const uint8_t> bytes);
  // fsync, rename over the destination, fsync its directory (best effort).
  void commit();
  uint64_t bytes_written() const { return written_; }

 private:
  std::filesystem::path path_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace fp4emu::io
