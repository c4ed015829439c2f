// golden generate under a write error: the file-size limit (RLIMIT_FSIZE,
// set by `ulimit -f` in a child shell) makes a write fail with EFBIG, as a
// full disk fails with ENOSPC. The run must exit 2 naming the limit and leave
// neither the suite nor its staging folder.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_util.hpp"

namespace fs = std::filesystem;
using fp4emu::testing::TempDir;

namespace {

fp4emu::testing::CliResult run_limited(const std::string& limit_kb, const std::string& args) {
  return fp4emu::testing::run_shell("sh -c 'ulimit -f " + limit_kb + " && exec \"$0\" \"$@\"' " + FP4EMU_CLI_PATH +
                                    " " + args);
}

}  // namespace

TEST(GoldenGenerateWrite, FileSizeLimitExitsTwoAndLeavesNothing) {
  TempDir dir;
  const fs::path out = dir / "suite";
  // 4 KB: the first larger file (an .npy of a random case, the manifest) fails.
  const auto r = run_limited("4", "golden generate --recipe mxfp4.ocp --threads 2 --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("file-size limit"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a staging folder or temporary was left behind";
  // The same run without the limit writes the suite (the limit was the cause).
  const auto ok = run_limited("unlimited", "golden generate --recipe mxfp4.ocp --threads 2 --out " + out.string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(fs::exists(out / "manifest.json"));
}
