// The umbrella header fp4emu/fp4emu.hpp includes every public header, and the
// README's C++ example is the consumer project's source (tests/consumer/,
// built and run by the test package_consumer). That each header compiles on
// its own is the target fp4emu_header_check.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// The fenced blocks of `lang` in the README section `title`.
std::vector<std::string> readme_blocks(const std::string& title, const std::string& lang) {
  const std::string readme = read_text(std::filesystem::path(FP4EMU_SOURCE_DIR) / "README.md");
  const size_t section = readme.find("\n## " + title + "\n");
  if (section == std::string::npos) return {};
  const size_t section_end = readme.find("\n## ", section + 1);
  std::vector<std::string> blocks;
  const std::string fence = "```" + lang + "\n";
  for (size_t at = readme.find(fence, section); at < section_end; at = readme.find(fence, at)) {
    const size_t end = readme.find("```\n", at + fence.size());
    if (end == std::string::npos) break;
    blocks.push_back(readme.substr(at + fence.size(), end - at - fence.size()));
    at = end + 4;
  }
  return blocks;
}

// Every C++ example of "From C++" is a source of the consumer project, which
// the test package_consumer builds (-Werror) against an installed tree and
// runs; its CMake lines are the consumer's. (package_consumer also runs the
// section's sh block: tests/consumer/run.cmake.)
TEST(PublicHeaders, ReadmeCppExamplesAreTheConsumerProject) {
  const std::filesystem::path consumer = std::filesystem::path(FP4EMU_SOURCE_DIR) / "tests" / "consumer";
  const std::vector<std::string> cpp = readme_blocks("From C++", "cpp");
  ASSERT_EQ(cpp.size(), 1u) << "README.md \"From C++\" should hold one C++ program, tests/consumer/main.cpp";
  EXPECT_EQ(cpp[0], read_text(consumer / "main.cpp"))
      << "README.md's C++ example under \"From C++\" must be tests/consumer/main.cpp verbatim";
  const std::vector<std::string> cmake = readme_blocks("From C++", "cmake");
  ASSERT_EQ(cmake.size(), 1u);
  const std::string lists = read_text(consumer / "CMakeLists.txt");
  std::istringstream lines(cmake[0]);
  for (std::string line; std::getline(lines, line);) {
    for (size_t at; (at = line.find("my_app")) != std::string::npos;) line.replace(at, 6, "consumer");
    EXPECT_NE(lists.find(line + "\n"), std::string::npos)
        << "README.md \"From C++\": '" << line << "' is not a line of tests/consumer/CMakeLists.txt";
  }
}

}  // namespace
}  // namespace fp4emu
