// The atomic writer on destinations that are not plain files (devices, FIFOs,
// standard output, descriptors, symbolic links), write errors, file-size
// limits, and temporaries left by killed writers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"
#include "io_test_util.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace fp4emu::io;
using fp4emu::testing::expect_input_error;
using fp4emu::testing::read_bytes;
using fp4emu::testing::TempDir;
using fp4emu::testing::write_bytes;

namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The PID of a process that has exited (and been reaped).
int dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return static_cast<int>(pid);
}

// Runs `body` in a child process with its standard output sent to `out`;
// returns the child's exit code (-1 if it died of a signal).
template <class Body>
int in_child_with_stdout(const fs::path& out, int open_flags, Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), open_flags, 0644);
    if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(90);
    ::close(fd);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

// ---- symbolic links -----------------------------------------------------------

TEST(AtomicWriteTargets, SymlinkIsFollowedAndKept) {
  TempDir dir;
  fs::create_directories(dir / "real");
  write_bytes(dir / "real" / "r.json", "old");
  fs::create_symlink("real/r.json", dir / "link.json");  // relative to the link's folder
  write_file_atomic(dir / "link.json", bytes_of("new"));
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(read_bytes(dir / "real" / "r.json"), "new");
  EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"r.json"});  // no temporary left

  // A chain of links, and a link to a file that does not exist yet.
  fs::create_symlink(dir / "link.json", dir / "link2.json");
  write_file_atomic(dir / "link2.json", bytes_of("newer"));
  EXPECT_TRUE(fs::is_symlink(dir / "link2.json"));
  EXPECT_EQ(read_bytes(dir / "real" / "r.json"), "newer");
  fs::create_symlink("real/fresh.json", dir / "dangling.json");
  write_file_atomic(dir / "dangling.json", bytes_of("f"));
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.json"));
  EXPECT_EQ(read_bytes(dir / "real" / "fresh.json"), "f");

  // The streamed writer too.
  {
    AtomicFileWriter w(dir / "link.json");
    w.write(bytes_of("streamed"));
    w.commit();
  }
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(read_bytes(dir / "real" / "r.json"), "streamed");
}

TEST(AtomicWriteTargets, SymlinkToADirectoryOrLoopIsRefused) {
  TempDir dir;
  fs::create_directories(dir / "d");
  fs::create_symlink("d", dir / "to_dir");
  expect_input_error([&] { write_file_atomic(dir / "to_dir", bytes_of("x")); }, {"to_dir", "is a directory"});
  expect_input_error([&] { check_output_path(dir / "to_dir", "--json"); }, {"--json", "to_dir", "is a directory"});
  fs::create_symlink("loop_b", dir / "loop_a");
  fs::create_symlink("loop_a", dir / "loop_b");
  expect_input_error([&] { write_file_atomic(dir / "loop_a", bytes_of("x")); }, {"loop_a", "symbolic links"});
  EXPECT_TRUE(fs::is_empty(dir / "d"));
}

// ---- devices and FIFOs: written in place, never replaced ----------------------

// Device nodes of our own (as /dev/null and /dev/full are), so that a
// failure cannot replace the system's. Without the privilege to make them,
// the system's, which such a process cannot replace either.
TEST(AtomicWriteTargets, CharacterDeviceIsWrittenInPlace) {
  TempDir dir;
  fs::path null_dev = dir / "null";
  fs::path full_dev = dir / "full";
  if (::mknod(null_dev.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0 ||
      ::mknod(full_dev.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0) {
    if (::geteuid() == 0) GTEST_SKIP() << "cannot make device nodes: " << std::strerror(errno);
    null_dev = "/dev/null";
    full_dev = "/dev/full";
  }
  struct stat before {};
  ASSERT_EQ(::lstat(null_dev.c_str(), &before), 0);
  check_output_path(null_dev, "--json");
  write_file_atomic(null_dev, bytes_of("discarded"));
  {
    AtomicFileWriter w(null_dev);
    w.write(bytes_of("discarded"));
    w.commit();
  }
  struct stat after {};
  ASSERT_EQ(::lstat(null_dev.c_str(), &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode)) << "the device node was replaced";
  EXPECT_EQ(before.st_ino, after.st_ino);

  // A write error is reported: /dev/full gives ENOSPC.
  expect_input_error([&] { write_file_atomic(full_dev, bytes_of("x")); },
                     {full_dev.string(), "write failed", "No space left on device"});
  ASSERT_EQ(::lstat(full_dev.c_str(), &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  std::vector<std::string> left = names_in(dir.path());
  EXPECT_TRUE(left.empty() || left == (std::vector<std::string>{"full", "null"}));
}

TEST(AtomicWriteTargets, FifoIsWrittenInPlace) {
  TempDir dir;
  const fs::path fifo = dir / "out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string payload(200000, 'p');  // more than a pipe buffer
  auto reader = std::async(std::launch::async, [&] { return read_bytes(fifo); });
  write_file_atomic(fifo, bytes_of(payload));
  ASSERT_EQ(reader.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(reader.get(), payload);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.fifo"});
}

// ---- standard output and descriptors ------------------------------------------

TEST(AtomicWriteTargets, DescriptorPathsWriteThroughTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  write_file_atomic(fmt::format("/dev/fd/{}", fds[1]), bytes_of("via dev/fd;"));
  write_file_atomic(fmt::format("/proc/self/fd/{}", fds[1]), bytes_of("via proc"));
  ::close(fds[1]);
  std::string got;
  char buf[64];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(got, "via dev/fd;via proc");
  expect_input_error([] { write_file_atomic("/dev/fd/987", bytes_of("x")); }, {"/dev/fd/987", "not open"});
}

// "-" and /dev/stdout write to standard output, in order with what was
// printed before; a file the shell redirected stdout to keeps its inode (a
// rename would leave the shell's descriptor on a deleted file).
TEST(AtomicWriteTargets, StdoutIsWrittenInPlace) {
  TempDir dir;
  const fs::path out = dir / "stdout.txt";
  const int rc = in_child_with_stdout(out, O_WRONLY | O_CREAT | O_TRUNC, [] {
    std::printf("printed;");  // buffered: must come first
    try {
      write_file_atomic("-", bytes_of("dash;"));
      write_file_atomic("/dev/stdout", bytes_of("dev-stdout;"));
      check_output_path("-", "--json");
      check_output_path("/dev/stdout", "--json");
    } catch (const std::exception&) {
      return 3;
    }
    std::printf("end");
    std::fflush(stdout);
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(read_bytes(out), "printed;dash;dev-stdout;end");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"stdout.txt"});
}

// ---- file-size limits ---------------------------------------------------------

// Past RLIMIT_FSIZE the kernel sends SIGXFSZ, which kills a process by
// default (exit 153 in a shell). The writer ignores it, so the write fails
// with a message and the temporary is removed.
TEST(AtomicWriteErrors, FileSizeLimitIsAnError) {
  TempDir dir;
  int msg_pipe[2];
  ASSERT_EQ(::pipe(msg_pipe), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(msg_pipe[0]);
    const rlimit lim{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(90);
    try {
      write_file_atomic(dir / "big.bin", std::vector<uint8_t>(100000, 7));
    } catch (const fp4emu::InputError& e) {
      const std::string_view m = e.what();
      (void)!::write(msg_pipe[1], m.data(), m.size());
      ::_exit(2);
    }
    ::_exit(0);
  }
  ::close(msg_pipe[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(msg_pipe[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  ::close(msg_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(msg.find("big.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("file-size limit"), std::string::npos) << msg;
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(AtomicWriteErrors, CliUnderAFileSizeLimitExitsTwo) {
  TempDir dir;
  fp4emu::io::Array a;
  a.dtype = DType::f32;
  a.shape = {64, 1024};
  a.bytes.assign(64 * 1024 * 4, 0);
  write_npy(dir / "x.npy", a);
  const std::string line = fmt::format("ulimit -f 16; {} fake-quant {} {} --format mxfp4 > {} 2>&1; echo $? > {}",
                                       FP4EMU_CLI_PATH, (dir / "x.npy").string(), (dir / "y.npy").string(),
                                       (dir / "log").string(), (dir / "rc").string());
  ASSERT_EQ(std::system(line.c_str()), 0);
  EXPECT_EQ(read_bytes(dir / "rc"), "2\n") << read_bytes(dir / "log");
  EXPECT_NE(read_bytes(dir / "log").find("file-size limit"), std::string::npos) << read_bytes(dir / "log");
  EXPECT_FALSE(fs::exists(dir / "y.npy"));
}

// ---- temporaries left by killed writers ---------------------------------------

TEST(AtomicWriteLeftovers, StaleTemporariesOfTheTargetAreRemoved) {
  TempDir dir;
  const int dead = dead_pid();
  const int live = static_cast<int>(::getpid());
  const std::string stale_file = fmt::format("out.json.tmp.{}.0123456789abcdef", dead);
  const std::string live_file = fmt::format("out.json.tmp.{}.fedcba9876543210", live);
  const std::string stale_stage = fmt::format(".out.json.tmp-golden-{}", dead);
  const std::string live_stage = fmt::format(".out.json.tmp-golden-{}", live);
  const std::string stale_old = fmt::format(".out.json.old-golden-{}", dead);
  // Not temporaries of out.json: another target, a name that only looks alike.
  const std::string other_target = fmt::format("other.json.tmp.{}.0123456789abcdef", dead);
  const std::string not_ours = fmt::format("out.json.tmp.{}.notes", dead);
  for (const std::string& f : {stale_file, live_file, other_target, not_ours}) write_bytes(dir / f, "partial");
  for (const std::string& d : {stale_stage, live_stage, stale_old}) {
    fs::create_directories(dir / d / "sub");
    write_bytes(dir / d / "sub" / "a.npy", "partial");
  }
  write_bytes(dir / "out.json", "previous");  // so the previous suite moved aside is stale too
  write_file_atomic(dir / "out.json", bytes_of("{}"));
  std::vector<std::string> expected = {live_stage, live_file, not_ours, other_target, "out.json"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names_in(dir.path()), expected);
  EXPECT_EQ(read_bytes(dir / "out.json"), "{}");
}

// A previous golden suite moved aside is the only copy while the target is
// missing: kept.
TEST(AtomicWriteLeftovers, OnlyCopyOfAPreviousSuiteIsKept) {
  TempDir dir;
  const std::string old = fmt::format(".suite.old-golden-{}", dead_pid());
  fs::create_directories(dir / old);
  remove_stale_temporaries(dir / "suite");
  EXPECT_TRUE(fs::exists(dir / old));
  fs::create_directories(dir / "suite");
  remove_stale_temporaries(dir / "suite");
  EXPECT_FALSE(fs::exists(dir / old));
}

// Through a symbolic link, the temporaries next to the file it names.
TEST(AtomicWriteLeftovers, FollowsTheLinkToTheTarget) {
  TempDir dir;
  fs::create_directories(dir / "real");
  fs::create_symlink("real/r.json", dir / "link.json");
  const std::string stale = fmt::format("r.json.tmp.{}.00aa", dead_pid());
  write_bytes(dir / "real" / stale, "partial");
  write_file_atomic(dir / "link.json", bytes_of("x"));
  EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"r.json"});
}
