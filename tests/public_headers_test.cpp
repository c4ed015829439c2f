// The umbrella header fp4emu/fp4emu.hpp includes every public header, and the
// README's C++ example is the consumer project's source (tests/consumer/,
// built and run by the test package_consumer). That each header compiles on
// its own is the target fp4emu_header_check.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fp4emu/fp4emu.hpp"

namespace fp4emu {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PublicHeaders, UmbrellaIncludesEveryHeader) {
  const std::filesystem::path include = std::filesystem::path(FP4EMU_SOURCE_DIR) / "include";
  std::ifstream in(include / "fp4emu" / "fp4emu.hpp");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  int headers = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(include / "fp4emu")) {
    if (e.path().extension() != ".hpp" || e.path().filename() == "fp4emu.hpp") continue;
    ++headers;
    const std::string name = std::filesystem::relative(e.path(), include).generic_string();
    EXPECT_NE(text.str().find("#include \"" + name + "\""), std::string::npos)
        << name << " is public but include/fp4emu/fp4emu.hpp does not include it";
  }
  EXPECT_GT(headers, 30);
}

TEST(PublicHeaders, ReadmeCppExampleIsTheConsumerSource) {
  const std::filesystem::path root(FP4EMU_SOURCE_DIR);
  const std::string readme = read_text(root / "README.md");
  const size_t section = readme.find("\n## From C++\n");
  ASSERT_NE(section, std::string::npos) << "README.md has no section \"From C++\"";
  const std::string fence = "```cpp\n";
  const size_t start = readme.find(fence, section);
  ASSERT_NE(start, std::string::npos);
  const size_t end = readme.find("```\n", start + fence.size());
  ASSERT_NE(end, std::string::npos);
  const std::string example = readme.substr(start + fence.size(), end - start - fence.size());
  EXPECT_EQ(example, read_text(root / "tests" / "consumer" / "main.cpp"))
      << "README.md's first C++ example under \"From C++\" must be tests/consumer/main.cpp verbatim";
}

}  // namespace
}  // namespace fp4emu
