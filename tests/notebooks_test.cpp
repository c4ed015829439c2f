// The notebooks in notebooks/ run end to end with Debian's Jupyter
// (/usr/bin/jupyter and /usr/bin/python3, never another python on PATH)
// against this build's Python module fp4emu (python/), and write the figures
// they promise. They use the module, not the command line.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_util.hpp"

namespace fp4emu {
namespace {

struct Notebook {
  const char* name;
  std::vector<const char*> outputs;  // files under FP4EMU_NB_OUT
};

class Notebooks : public ::testing::TestWithParam<Notebook> {};

TEST_P(Notebooks, ExecuteAndWriteTheirFigures) {
  const Notebook& nb = GetParam();
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/jupyter"))
      << "Debian's Jupyter is missing: run tools/install-deps.sh (jupyter-nbconvert, python3-ipykernel, "
         "python3-matplotlib)";
  if (!std::filesystem::exists(std::filesystem::path(FP4EMU_PYTHON_DIR) / "fp4emu" / "__init__.py"))
    GTEST_SKIP() << "the Python module is not built: configure with -DFP4EMU_BUILD_PYTHON=ON";
  testing::TempDir dir;
  const std::filesystem::path src = std::filesystem::path(FP4EMU_SOURCE_DIR) / "notebooks" / nb.name;
  {
    std::ifstream in(src);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("subprocess"), std::string::npos) << nb.name << " runs a process; use the fp4emu module";
  }
  // PATH limited to the system so the kernel and every tool are Debian's.
  const std::string cmd = fmt::format(
      "cd '{}' && env PATH=/usr/bin:/bin PYDEVD_DISABLE_FILE_VALIDATION=1 FP4EMU_ROOT='{}' PYTHONPATH='{}' "
      "FP4EMU_NB_OUT='{}' /usr/bin/jupyter nbconvert --execute --to notebook --output-dir '{}' "
      "--ExecutePreprocessor.timeout=600 '{}' > '{}' 2>&1",
      dir.path().string(), FP4EMU_SOURCE_DIR, FP4EMU_PYTHON_DIR, (dir / "out").string(), dir.path().string(),
      src.string(), (dir / "log.txt").string());
  const int status = std::system(cmd.c_str());
  std::string log;
  if (FILE* f = std::fopen((dir / "log.txt").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) log.append(buf, n);
    std::fclose(f);
  }
  ASSERT_EQ(status, 0) << log;
  EXPECT_TRUE(std::filesystem::exists(dir / nb.name)) << log;
  for (const char* out : nb.outputs) EXPECT_TRUE(std::filesystem::exists(dir / "out" / out)) << out << "\n" << log;
}

INSTANTIATE_TEST_SUITE_P(
    All, Notebooks,
    ::testing::Values(Notebook{"underflow.ipynb",
                               {"underflow_summary.csv", "underflow_by_layer.png", "underflow_histogram.png",
                                "underflow_outliers.png"}},
                      Notebook{"resq.ipynb", {"resq.json", "resq_patterns.png", "resq_deletion.png"}},
                      Notebook{"formats.ipynb", {"formats_qsnr_ur.png", "formats_transforms.png"}},
                      Notebook{"sr_bias.ipynb",
                               {"sr_bias.json", "sr_bias_tensors.csv", "sr_bias_accumulation.csv", "sr_bias.png"}},
                      Notebook{"tiny_llm.ipynb",
                               {"rollout_table.png", "rollout_scatter.png", "rollout_layers.png", "tiny_llm_live.json",
                                "tiny_llm_fp4_pretrain_live.json"}}),
    [](const ::testing::TestParamInfo<Notebook>& info) {
      std::string n = info.param.name;
      return n.substr(0, n.find('.'));
    });

}  // namespace
}  // namespace fp4emu
