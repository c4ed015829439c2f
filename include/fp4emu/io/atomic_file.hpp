#pragma once
// Output files are written whole or not at all (docs/architecture.md §7): the bytes go
// to "<name>.tmp.<pid>.<random>" in the destination's directory, are fsynced,
// and the temporary is renamed over the destination. A reader sees the old
// file or the complete new one, never a partial write; a failed run leaves
// nothing behind.
//
// Destinations that are not files are written in place, since renaming a
// file over them would replace them: "-" (standard output), a character
// device (/dev/null), a FIFO or socket, and a descriptor named through
// /dev/fd/N, /dev/stdout, /dev/stderr or /proc/self/fd/N (written through that
// descriptor, so output the shell redirected to a file lands where the shell
// put it). Partial output can reach such a destination when a run fails.
// A symbolic link is followed to the file it names: the temporary is made
// next to that file and renamed over it, and the link stays.
//
// The first writer sets SIGXFSZ to be ignored (unless the program installed
// a handler of its own), so that a write past a file-size limit fails with a
// message instead of killing the process.
//
// Temporaries of the same destination that a killed process left behind
// (its PID no longer runs) are removed when the destination is next written;
// see remove_stale_temporaries.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace fp4emu::io {

// Writes `bytes` to `path` as above, replacing any existing file. On any
// failure the temporary is removed and InputError is thrown naming `path`
// and the reason (missing directory, permission denied, no space left, file
// size limit, path is a directory, ...).
void write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes);

// Checks, before a long run, that `path` can be an output: "-", an existing
// device/FIFO, or a file (through any symbolic links) whose directory exists
// and which is not itself a directory. InputError naming `label` (the option,
// e.g. "--json") and the path otherwise. The write itself can still fail
// later (permissions, disk full) and then reports as above.
void check_output_path(const std::filesystem::path& path, std::string_view label);

// Removes what writers of `target` that no longer run left next to it (in the
// directory of the file `target` names, through symbolic links):
//   "<name>.tmp.<pid>.<hex>"      files of AtomicFileWriter,
//   ".<name>.tmp-golden-<pid>"    staging folders of `golden generate`,
//   ".<name>.old-golden-<pid>"    a previous suite moved aside, only when
//                                 <name> itself exists (otherwise it is the
//                                 only copy and is kept for the user),
// where process <pid> does not exist. A live process's temporaries are
// kept. Best effort: entries that cannot be removed are left.
void remove_stale_temporaries(const std::filesystem::path& target);

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
  // fsync, rename over the destination, fsync its directory (best effort);
  // for a destination written in place, only close it.
  void commit();
  uint64_t bytes_written() const { return written_; }

 private:
  std::filesystem::path path_;    // as given, for messages
  std::filesystem::path target_;  // the file renamed over (symbolic links resolved)
  std::string tmp_;               // empty when written in place
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace fp4emu::io
