// Every option of every command, tried with hostile values. The commands and
// options are enumerated from the CLI11 app itself (cli::build_app), so a new
// option is tried as soon as it exists. Each invocation starts from a small
// valid command line and changes one option; it must exit 2 with a message
// naming the option and leave no output behind, unless the value is valid for
// that option: those are listed, with the reason, in kValid. Never exit 3,
// never a signal, never a hang.
//
// The second half pins the individual defects of hostile use (same file in
// and out, thread counts, sizes, messages, values accepted silently).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "cli.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "test_util.hpp"

extern char** environ;

namespace fp4emu {
namespace {

using testing::TempDir;

struct CliRun {
  int exit_code = -1;  // 128 + signal when the process died of one (as `timeout` reports it)
  std::string output;  // stdout and stderr together
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs fp4emu with exactly these arguments (no shell: empty values, newlines
// and any byte pass as they are), killed after `timeout_s`.
CliRun run_args(const std::vector<std::string>& args, const std::filesystem::path& log, int timeout_s = 60) {
  std::vector<std::string> full = {"/usr/bin/timeout", "-s", "KILL", std::to_string(timeout_s), FP4EMU_CLI_PATH};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  CliRun r;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  r.output = slurp(log);
  return r;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s = "fp4emu";
  for (const std::string& a : args) s += " '" + a.substr(0, 80) + (a.size() > 80 ? "...'" : "'");
  return s;
}

// ---- the valid command lines ----------------------------------------------------

// Small inputs every command line below reads; made once.
class Inputs {
 public:
  Inputs() {
    std::mt19937 rng(7);
    std::normal_distribution<float> g;
    auto matrix = [&](int64_t m, int64_t n) {
      std::vector<float> v(size_t(m * n));
      for (float& x : v) x = g(rng);
      return io::from_f32({m, n}, v);
    };
    io::write_npy(path("x.npy"), matrix(2, 64));
    io::write_npy(path("a.npy"), matrix(4, 64));
    io::write_npy(path("b.npy"), matrix(64, 4));
    std::vector<io::SafetensorsTensor> ts;
    for (const char* p : {"self_attn.o_proj", "mlp.down_proj"})
      ts.push_back({fmt::format("model.layers.0.{}.input", p), matrix(8, 64)});
    io::write_safetensors(path("dump.safetensors"), ts, {});
    std::vector<io::SafetensorsTensor> ws;
    for (const char* p : {"self_attn.o_proj", "mlp.down_proj"})
      ws.push_back({fmt::format("model.layers.0.{}.weight", p), matrix(4, 64)});
    io::write_safetensors(path("weights.safetensors"), ws, {});
    const std::filesystem::path log = dir_ / "setup.log";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"quantize", path("x.npy"), path("q.safetensors"), "--format", "mxfp4"},
          {"fake-quant", path("x.npy"), path("xq.npy"), "--format", "mxfp4"},
          {"golden", "generate", "--out", path("suite"), "--recipes", "mxfp4.ocp"}}) {
      const CliRun r = run_args(args, log);
      EXPECT_EQ(r.exit_code, 0) << joined(args) << "\n" << r.output;
    }
    // A candidate that passes: the suite's own files, and the refusal
    // (error.txt) of an expect-error case.
    std::filesystem::copy(path("suite"), path("candidate"), std::filesystem::copy_options::recursive);
    for (const auto& e : std::filesystem::recursive_directory_iterator(path("candidate")))
      if (e.is_directory() && e.path().filename().string().find("tail_error") != std::string::npos)
        std::ofstream(e.path() / "error.txt") << "tail not a multiple of the block\n";
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  TempDir dir_;
};

const Inputs& inputs() {
  static const Inputs in;
  return in;
}

// A valid invocation: positionals, then options (name, value). `out` in a
// value stands for the invocation's own output folder.
struct Base {
  std::vector<std::string> positionals;
  std::vector<std::pair<std::string, std::string>> options;
};

// One per command; a command without one fails the test (so none is skipped).
std::map<std::string, Base> bases() {
  const Inputs& in = inputs();
  return {
      {"formats", {{}, {}}},
      {"fake-quant", {{in.path("x.npy"), "out/y.npy"}, {{"--format", "nvfp4"}}}},
      {"quantize", {{in.path("x.npy"), "out/q.safetensors"}, {{"--format", "nvfp4"}}}},
      {"dequantize", {{in.path("q.safetensors"), "out/y.npy"}, {}}},
      {"compare", {{in.path("dump.safetensors")}, {{"--format", "mxfp4"}}}},
      {"inspect", {{in.path("dump.safetensors")}, {}}},
      {"sample", {{"out/s.safetensors"}, {{"--layers", "1"}, {"--tokens", "4"}, {"--hidden", "64"},
                                         {"--intermediate", "64"}, {"--outliers", "1"}}}},
      {"gemm", {{in.path("a.npy"), in.path("b.npy"), "out/c.npy"}, {{"--format", "nvfp4"}, {"--model", "exact"}}}},
      {"golden generate", {{}, {{"--out", "out/suite"}, {"--recipes", "mxfp4.ocp"}}}},
      {"golden verify", {{}, {{"--suite", in.path("suite")}, {"--candidate", in.path("candidate")}}}},
      {"underflow", {{in.path("dump.safetensors")}, {{"--format", "mxfp4"}, {"--out", "out/uf"}}}},
      {"resq", {{in.path("dump.safetensors")}, {{"--format", "mxfp4"}, {"--pattern", "2:4"}, {"--out", "out/rq"}}}},
      {"identify", {{}, {{"--input", in.path("x.npy")}, {"--output", in.path("xq.npy")}, {"--format", "mxfp4"}}}},
  };
}

// A valid item of each list option (for the duplicate and empty-item tries),
// and whether the option splits its value at commas or is repeated instead.
struct ListItem {
  std::string item;
  bool split;
};
std::map<std::pair<std::string, std::string>, ListItem> list_items() {
  return {
      {{"compare", "--tensor"}, {"model.layers.0.mlp.down_proj.input", false}},
      {{"compare", "--format"}, {"mxfp4", true}},
      {{"compare", "--recipe"}, {"mxfp4.ocp", true}},
      {{"inspect", "--tensor"}, {"model.layers.0.mlp.down_proj.input", false}},
      {{"golden generate", "--formats"}, {"mxfp4", true}},
      {{"golden generate", "--recipes"}, {"mxfp4.ocp", true}},
      {{"golden generate", "--family"}, {"codes", false}},
      {{"golden generate", "--case"}, {"mxfp4.ocp/*", false}},
      {{"golden verify", "--family"}, {"codes", false}},
      {{"golden verify", "--case"}, {"mxfp4.ocp/*", false}},
      {{"golden verify", "--recipe"}, {"mxfp4.ocp", true}},
      {{"underflow", "--tensor"}, {"model.layers.0.mlp.down_proj.input", false}},
      {{"underflow", "--format"}, {"mxfp4", true}},
      {{"underflow", "--recipe"}, {"mxfp4.ocp", true}},
      {{"underflow", "--transform"}, {"rht", false}},
      {{"resq", "--tensor"}, {"model.layers.0.mlp.down_proj.input", false}},
      {{"resq", "--format"}, {"mxfp4", true}},
      {{"resq", "--recipe"}, {"mxfp4.ocp", true}},
      {{"resq", "--pattern"}, {"2:4", true}},
  };
}

// ---- the hostile values, and the reviewed exceptions ----------------------------

const std::string kLong(10000, 'x');

std::vector<std::string> numeric_values() {
  return {"0", "-1", "2147483648", "-2147483648", "1e30", "nan", "inf", "-inf", "", "junk"};
}
std::vector<std::string> text_values() { return {"", "junk", kLong}; }

struct Valid {
  const char* command;
  const char* option;
  const char* value;  // nullptr: any value tried
  const char* why;
};

// (command, option, value) that are valid, so exit 0 is right.
const Valid kValid[] = {
    // --threads 0 is the documented default: every hardware thread.
    {"fake-quant", "--threads", "0", "0 = every hardware thread"},
    {"quantize", "--threads", "0", "0 = every hardware thread"},
    {"dequantize", "--threads", "0", "0 = every hardware thread"},
    {"gemm", "--threads", "0", "0 = every hardware thread"},
    {"golden generate", "--threads", "0", "0 = every hardware thread"},
    {"identify", "--threads", "0", "0 = every hardware thread"},
    {"underflow", "--threads", "0", "0 = every hardware thread"},
    {"resq", "--threads", "0", "0 = every hardware thread"},
    {"compare", "--threads", "0", "0 = every hardware thread"},
    // A row-piece threshold of 2 GiB is a size like any other.
    {"compare", "--split-rows-above", "2147483648", "2 GiB"},
    {"inspect", "--split-rows-above", "2147483648", "2 GiB"},
    {"underflow", "--split-rows-above", "2147483648", "2 GiB"},
    {"resq", "--split-rows-above", "2147483648", "2 GiB"},
    {"inspect", "--threads", "0", "0 = every hardware thread"},
    {"golden verify", "--threads", "0", "0 = every hardware thread"},
    {"sample", "--threads", "0", "0 = every hardware thread"},
    // --axis 0 and -1 are real axes of a 2-D input (a 2 x 64 input padded along axis 0).
    {"fake-quant", "--axis", "0", "a valid axis"},
    {"fake-quant", "--axis", "-1", "a valid axis"},
    {"quantize", "--axis", "0", "a valid axis"},
    {"quantize", "--axis", "-1", "a valid axis"},
    {"identify", "--axis", "0", "a valid axis (the report says no recipe matches along it)"},
    {"identify", "--axis", "-1", "a valid axis"},
    {"compare", "--axis", "0", "a valid axis"},
    {"compare", "--axis", "-1", "a valid axis"},
    // An NVFP4 per-tensor amax: 0 is TransformerEngine's all-zero case
    // (S_enc = 1); 2^31 and 1e30 are large amaxes (tiny S_enc, all finite).
    {"fake-quant", "--global-amax", "0", "amax of an all-zero tensor"},
    {"fake-quant", "--global-amax", "2147483648", "a large amax"},
    {"fake-quant", "--global-amax", "1e30", "a large amax"},
    {"quantize", "--global-amax", "0", "amax of an all-zero tensor"},
    {"quantize", "--global-amax", "2147483648", "a large amax"},
    {"quantize", "--global-amax", "1e30", "a large amax"},
    // The epilogue scale: any finite fp32, 0 and negatives included.
    {"gemm", "--alpha", "0", "any finite fp32 scale"},
    {"gemm", "--alpha", "-1", "any finite fp32 scale"},
    {"gemm", "--alpha", "2147483648", "any finite fp32 scale"},
    {"gemm", "--alpha", "-2147483648", "any finite fp32 scale"},
    {"gemm", "--alpha", "1e30", "any finite fp32 scale"},
    // Seeds: any unsigned 64-bit value.
    {"sample", "--seed", "0", "a seed"},
    {"sample", "--seed", "2147483648", "a seed"},
    {"golden generate", "--seed", "0", "a seed"},
    {"golden generate", "--seed", "2147483648", "a seed"},
    {"underflow", "--seed", "0", "a seed"},
    {"underflow", "--seed", "2147483648", "a seed"},
    {"resq", "--seed", "0", "a seed"},
    {"resq", "--seed", "2147483648", "a seed"},
    // --intermediate 0 is the documented default (8/3 hidden).
    {"sample", "--intermediate", "0", "0 = the default width"},
    {"sample", "--outliers", "0", "no hot channels"},
    // golden verify lists no mismatch in detail with 0 (all are counted).
    {"golden verify", "--max-report", "0", "list none in detail"},
    // Outlier thresholds: any |x| or amax ratio >= 0; UR_B in [0, 1].
    {"underflow", "--tau-abs", "0", "a threshold"},
    {"underflow", "--tau-abs", "2147483648", "a threshold"},
    {"underflow", "--tau-abs", "1e30", "a threshold"},
    {"underflow", "--tau-rel", "0", "a threshold"},
    {"underflow", "--tau-rel", "2147483648", "a threshold"},
    {"underflow", "--tau-rel", "1e30", "a threshold"},
    {"underflow", "--tau-uf", "0", "a fraction"},
    // Synthetic weight rows: 2^31 x 64 fp32 is 512 GiB; used only by SmoothQuant,
    // which the base command line does not run.
    {"underflow", "--n", "2147483648", "unused without --transform smoothquant"},
    // Output paths: any name is a valid file or folder name.
    {"compare", "--json", "junk", "an output file name"},
    {"compare", "--csv", "junk", "an output file name"},
    {"inspect", "--json", "junk", "an output file name"},
    {"identify", "--json", "junk", "an output file name"},
    {"golden verify", "--junit", "junk", "an output file name"},
    {"compare", "--report", "junk", "an output file name"},
    {"underflow", "--report", "junk", "an output file name"},
    {"resq", "--report", "junk", "an output file name"},
    {"golden verify", "--report", "junk", "an output file name"},
    {"underflow", "--out", "junk", "an output folder name"},
    {"resq", "--out", "junk", "an output folder name"},
    {"golden generate", "--out", "junk", "an output folder name"},
    // A glob that matches nothing is refused, but --detail junk is a tensor name
    // looked up after the work: refused too. (No entry.)
};

const Valid* find_valid(const std::string& command, const std::string& option, const std::string& value) {
  for (const Valid& v : kValid)
    if (command == v.command && option == v.option && (!v.value || value == v.value)) return &v;
  return nullptr;
}

struct Try {
  std::string command, option, value;
  std::vector<std::string> args;
  bool valid;  // from kValid
};

// Every subcommand path ("golden verify") with its options.
void walk(CLI::App* app, const std::string& prefix, std::vector<std::pair<std::string, CLI::App*>>& out) {
  for (CLI::App* sub : app->get_subcommands({})) {
    const std::string name = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    if (sub->get_subcommands({}).empty()) out.emplace_back(name, sub);
    else walk(sub, name, out);
  }
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> w;
  std::istringstream in(s);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::vector<Try> all_tries(std::vector<std::string>& problems) {
  const std::unique_ptr<cli::CliApp> cli = cli::build_app();
  std::vector<std::pair<std::string, CLI::App*>> commands;
  walk(&cli->app, "", commands);
  const auto base_of = bases();
  const auto lists = list_items();
  std::vector<Try> tries;
  for (const auto& entry : commands) {
    // Named copies, not structured bindings: clang 14 cannot capture those in a lambda.
    const std::string& command = entry.first;
    const CLI::App* app = entry.second;
    const auto b = base_of.find(command);
    if (b == base_of.end()) {
      problems.push_back(fmt::format("command '{}' has no valid base invocation in bases()", command));
      continue;
    }
    for (const CLI::Option* opt : app->get_options()) {
      if (opt->get_positional() || opt == app->get_help_ptr() || opt == app->get_help_all_ptr()) continue;
      const std::string name = "--" + opt->get_lnames().at(0);
      auto make = [&](const std::vector<std::string>& hostile) {
        std::vector<std::string> args = split_words(command);
        for (const std::string& p : b->second.positionals) args.push_back(p);
        for (const auto& [o, v] : b->second.options)
          if (o != name) args.insert(args.end(), {o, v});
        args.insert(args.end(), hostile.begin(), hostile.end());
        return args;
      };
      auto add = [&](const std::string& value, const std::vector<std::string>& hostile) {
        tries.push_back({command, name, value, make(hostile), find_valid(command, name, value) != nullptr});
      };
      if (opt->get_expected_min() == 0) {  // a flag: no value to try but a wrong one
        add("junk", {name + "=junk"});
        continue;
      }
      const std::string type = opt->get_type_name();
      const bool numeric = type.find("INT") != std::string::npos || type.find("FLOAT") != std::string::npos;
      for (const std::string& v : numeric ? numeric_values() : text_values()) add(v, {name + "=" + v});
      if (opt->get_items_expected_max() > 1) {
        const auto item = lists.find({command, name});
        if (item == lists.end()) {
          problems.push_back(fmt::format("list option {} {} has no valid item in list_items()", command, name));
          continue;
        }
        const std::string& i = item->second.item;
        if (item->second.split) {
          add(i + ",", {name + "=" + i + ","});
          add("," + i, {name + "=," + i});
          add(i + ",," + i, {name + "=" + i + ",," + i});
          add(i + "," + i, {name + "=" + i + "," + i});
          add(i + ",junk", {name + "=" + i + ",junk"});
          add(i + "," + kLong, {name + "=" + i + "," + kLong});
        } else {
          add(i + " twice", {name + "=" + i, name + "=" + i});
        }
      }
    }
  }
  // Every reviewed exception must still be used, or it is stale.
  for (const Valid& v : kValid) {
    bool used = false;
    for (const Try& t : tries) used = used || (t.command == v.command && t.option == v.option &&
                                               (!v.value || t.value == v.value));
    if (!used) problems.push_back(fmt::format("kValid entry ({}, {}, {}) matches no try", v.command, v.option,
                                              v.value ? v.value : "*"));
  }
  return tries;
}

TEST(CliHostile, EveryOptionOfEveryCommandRefusesHostileValues) {
  std::vector<std::string> problems;
  const std::vector<Try> tries = all_tries(problems);
  for (const std::string& p : problems) ADD_FAILURE() << p;
  ASSERT_GT(tries.size(), 500u);
  TempDir dir;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (size_t i = next++; i < tries.size(); i = next++) {
      const Try& t = tries[i];
      const std::filesystem::path run_dir = dir / fmt::format("run{}", i);
      std::filesystem::create_directories(run_dir / "out");
      std::vector<std::string> args = t.args;
      for (std::string& a : args)
        if (a.rfind("out/", 0) == 0) a = (run_dir / a).string();
      // "junk" as an output path lands in the run folder, not the working directory.
      if (t.valid && t.value == "junk") args.back() = t.option + "=" + (run_dir / "junk").string();
      const CliRun r = run_args(args, run_dir / "log");
      std::string why;
      if (r.exit_code != 0 && r.exit_code != 2) why = fmt::format("exit {}", r.exit_code);
      else if (t.valid && r.exit_code != 0) why = "exit 2 for a value kValid lists as valid";
      else if (!t.valid && r.exit_code != 2) why = "exit 0 for a hostile value";
      // A long value may be shortened in the message: its start names it.
      else if (!t.valid && r.output.find(t.option) == std::string::npos &&
               r.output.find(t.value.substr(0, 40)) == std::string::npos)
        why = "the message names neither the option nor the value";
      else if (!t.valid && !std::filesystem::is_empty(run_dir / "out"))
        why = "output left behind after exit 2";
      if (!why.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(fmt::format("{} {}={}: {}\n  {}\n  {}", t.command, t.option, t.value.substr(0, 40), why,
                                       joined(args), r.output.substr(0, 600)));
      }
      std::error_code ec;
      std::filesystem::remove_all(run_dir, ec);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < 4; ++k) pool.emplace_back(worker);
  for (std::thread& th : pool) th.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  std::printf("%zu invocations, %zu failures\n", tries.size(), failures.size());
}

// ---- the individual defects --------------------------------------------------

struct Pinned {
  const char* what;
  std::vector<std::string> args;  // "IN/x": a file of the shared inputs; "out/x": the case's output folder
  int exit_code;
  std::string expect;             // in the output
  std::string never = {};         // not in the output
};

std::vector<std::string> resolve(const std::vector<std::string>& args, const std::filesystem::path& run_dir) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (a.rfind("IN/", 0) == 0) out.push_back(inputs().path(a.substr(3)));
    else if (a.rfind("out/", 0) == 0) out.push_back((run_dir / a).string());
    else out.push_back(a);
  }
  return out;
}

void check_pinned(const std::vector<Pinned>& cases) {
  TempDir dir;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Pinned& c = cases[i];
    const std::filesystem::path run_dir = dir / fmt::format("case{}", i);
    std::filesystem::create_directories(run_dir / "out");
    const std::vector<std::string> args = resolve(c.args, run_dir);
    const CliRun r = run_args(args, run_dir / "log");
    EXPECT_EQ(r.exit_code, c.exit_code) << c.what << "\n" << joined(args) << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.what << ": expected '" << c.expect << "'\n" << r.output;
    if (!c.never.empty()) {
      EXPECT_EQ(r.output.find(c.never), std::string::npos) << c.what << ": unexpected '" << c.never << "'\n"
                                                           << r.output;
    }
    if (c.exit_code == 2) {
      EXPECT_TRUE(std::filesystem::is_empty(run_dir / "out")) << c.what << ": output left behind";
    }
  }
}

// An output that is the input, by name, through a symlink or a hard link, is
// refused before anything is written; the input keeps its bytes.
TEST(CliHostile, NoCommandOverwritesItsInput) {
  TempDir dir;
  const std::filesystem::path x = dir / "x.npy", a = dir / "a.npy", q = dir / "q.safetensors";
  std::filesystem::copy_file(inputs().path("x.npy"), x);
  std::filesystem::copy_file(inputs().path("a.npy"), a);
  std::filesystem::copy_file(inputs().path("q.safetensors"), q);
  std::filesystem::create_symlink(x, dir / "x_link.safetensors");
  std::filesystem::create_hard_link(q, dir / "q_hard.npy");
  std::filesystem::create_hard_link(x, dir / "x_hard.json");
  const std::string xs = slurp(x), as = slurp(a), qs = slurp(q);
  const std::string b = inputs().path("b.npy");
  const std::vector<std::vector<std::string>> cases = {
      {"fake-quant", x, x, "--format", "hif4"},
      {"fake-quant", x, (dir / "x.npy").string(), "--format", "hif4"},
      {"quantize", x, (dir / "x_link.safetensors").string(), "--format", "mxfp4"},
      {"dequantize", q, (dir / "q_hard.npy").string()},
      {"gemm", a, b, a, "--format", "mxfp4", "--model", "exact"},
      {"compare", x, "--format", "mxfp4", "--json", (dir / "x_hard.json").string()},
      {"inspect", x, "--json", (dir / "x_hard.json").string()},
  };
  for (const auto& args : cases) {
    const CliRun r = run_args(args, dir.path().parent_path() / (dir.path().filename().string() + ".log"));
    EXPECT_EQ(r.exit_code, 2) << joined(args) << "\n" << r.output;
    EXPECT_NE(r.output.find("is the same file as the input"), std::string::npos) << joined(args) << "\n" << r.output;
  }
  std::filesystem::remove(dir.path().parent_path() / (dir.path().filename().string() + ".log"));
  EXPECT_EQ(slurp(x), xs);
  EXPECT_EQ(slurp(a), as);
  EXPECT_EQ(slurp(q), qs);
}

TEST(CliHostile, ThreadCountsFollowOneRule) {
  check_pinned({
      {"gemm, huge", {"gemm", "IN/a.npy", "IN/b.npy", "out/c.npy", "--format", "mxfp4", "--model", "exact",
                      "--threads", "100000"}, 2, "--threads: 100000 is out of range; use an integer in 0..1024"},
      {"golden generate, huge", {"golden", "generate", "--out", "out/suite", "--threads", "100000"}, 2,
       "--threads: 100000 is out of range"},
      {"negative: the range in words", {"fake-quant", "IN/x.npy", "out/y.npy", "--format", "hif4", "--threads=-1"},
       2, "0..1024", "1797"},
      {"gemm, negative", {"gemm", "IN/a.npy", "IN/b.npy", "out/c.npy", "--format", "mxfp4", "--model", "exact",
                          "--threads=-1"}, 2, "--threads: -1 is out of range"},
      {"the cap itself", {"gemm", "IN/a.npy", "IN/b.npy", "out/c.npy", "--format", "mxfp4", "--model", "exact",
                          "--threads", "1024"}, 0, ""},
  });
}

TEST(CliHostile, SizesThatOverflowAreRefusedBeforeAllocating) {
  for (const char* n : {"4611686018427387904", "9223372036854775807", "1099511627776"})
    check_pinned({
        {"resq --n", {"resq", "IN/dump.safetensors", "--format", "mxfp4", "--pattern", "2:4", "--n", n, "--out",
                      "out/rq"}, 2, "--n"},
        {"underflow --n", {"underflow", "IN/dump.safetensors", "--format", "mxfp4", "--transform", "smoothquant",
                           "--n", n, "--out", "out/uf"}, 2, "--n"},
    });
}

// OCC on a tensor without a finite value: nothing to clamp; the study reports
// the non-finite count (docs/analysis.md), it does not fail.
TEST(CliHostile, OccOnAnAllNanOrAllInfTensorIsReported) {
  TempDir dir;
  for (const float v : {std::nanf(""), INFINITY}) {
    const std::filesystem::path x = dir / "x.npy", out = dir / "uf";
    io::write_npy(x, io::from_f32({4, 64}, std::vector<float>(256, v)));
    const CliRun r = run_args({"underflow", x.string(), "--format", "mxfp4", "--transform", "occ", "--out", out.string()},
                           dir / "log");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = nlohmann::json::parse(slurp(out / "summary.json"));
    EXPECT_EQ(j["tensors"][0]["n_nonfinite"], 256) << v;
    EXPECT_EQ(j["tensors"][0]["n_nonzero"], 0) << v;
    std::filesystem::remove_all(out);
  }
}

TEST(CliHostile, MessagesSayWhatIsWrong) {
  check_pinned({
      {"fake-quant of a dump", {"fake-quant", "IN/dump.safetensors", "out/y.npy", "--format", "hif4"}, 2,
       "fp4emu compare", "later release"},
      {"--scale-rule names the recipe it runs", {"underflow", "IN/dump.safetensors", "--scale-rule", "floor", "--out",
                                                 "out/uf"}, 2, "ceil (2^ceil(log2(amax/6)), mxfp4.rceil)",
       "(mxfp4.ceil)"},
      {"a glob '[]' is one value", {"compare", "IN/dump.safetensors", "--tensor", "[]", "--format", "mxfp4"}, 2,
       "--tensor '[]'", "'--format'"},
      {"a glob '[]' is one value (underflow)", {"underflow", "IN/dump.safetensors", "--tensor", "[]", "--format",
                                                "mxfp4", "--out", "out/uf"}, 2, "'[]'", "'--format'"},
      {"--density is blamed, not the pattern", {"resq", "IN/dump.safetensors", "--density", "0", "--pattern", "2:4",
                                                "--out", "out/rq"}, 2, "--density", "pattern '2:4'"},
      {"a density only the pattern uses", {"resq", "IN/dump.safetensors", "--density", "1", "--pattern", "2:4",
                                           "--out", "out/rq"}, 2, "--density"},
      {"newline and invalid UTF-8 in a name are escaped", {"fake-quant", "IN/x\n\xff.txt", "out/y.npy", "--format",
                                                           "hif4"}, 2, "x\\n\\xff.txt"},
  });
  // Parser errors: the message is the last line, not hidden above a hint.
  TempDir dir;
  const CliRun r = run_args({"fake-quant", inputs().path("x.npy"), (dir / "y.npy").string(), "--format", "hif4",
                          "--threads", "lots"},
                         dir / "log");
  EXPECT_EQ(r.exit_code, 2);
  std::string last = r.output.substr(0, r.output.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_EQ(last.rfind("fp4emu: error: --threads: 'lots' is not an integer", 0), 0u) << r.output;
}

TEST(CliHostile, NonsenseIsRefused) {
  check_pinned({
      {"alpha NaN", {"gemm", "IN/a.npy", "IN/b.npy", "out/c.npy", "--format", "mxfp4", "--model", "exact", "--alpha",
                     "nan"}, 2, "--alpha"},
      {"alpha Inf", {"gemm", "IN/a.npy", "IN/b.npy", "out/c.npy", "--format", "mxfp4", "--model", "exact", "--alpha",
                     "inf"}, 2, "--alpha"},
      {"alpha beyond fp32", {"gemm", "IN/a.npy", "IN/b.npy", "out/c.npy", "--format", "mxfp4", "--model", "exact",
                             "--alpha", "1e39"}, 2, "not finite in fp32"},
      {"empty axis", {"fake-quant", "IN/x.npy", "out/y.npy", "--format", "hif4", "--axis="}, 2, "--axis"},
      {"negative seed", {"sample", "out/s.safetensors", "--seed=-1"}, 2, "--seed: '-1' is not a seed"},
      {"seed beyond 2^64", {"golden", "generate", "--out", "out/suite", "--seed", "18446744073709551616"}, 2,
       "--seed"},
      {"tau NaN", {"underflow", "IN/dump.safetensors", "--tau-abs", "nan", "--out", "out/uf"}, 2, "--tau-abs"},
      {"tau negative", {"underflow", "IN/dump.safetensors", "--tau-rel=-1", "--out", "out/uf"}, 2, "--tau-rel"},
      {"tau-uf above 1", {"underflow", "IN/dump.safetensors", "--tau-uf", "1.5", "--out", "out/uf"}, 2, "--tau-uf"},
      {"packed operands with --recipe", {"gemm", "IN/q.safetensors", "IN/q.safetensors", "out/c.npy", "--model",
                                         "exact", "--recipe", "mxfp4.rceil"}, 2, "--recipe applies to .npy operands"},
      {"packed operands with --round", {"gemm", "IN/q.safetensors", "IN/q.safetensors", "out/c.npy", "--model",
                                        "exact", "--round", "rha"}, 2, "--round applies"},
      {"packed operands with --tail", {"gemm", "IN/q.safetensors", "IN/q.safetensors", "out/c.npy", "--model",
                                       "exact", "--tail", "pad"}, 2, "--tail applies"},
      {"packed B with --recipe-b", {"gemm", "IN/a.npy", "IN/q.safetensors", "out/c.npy", "--format", "mxfp4",
                                    "--model", "exact", "--recipe-b", "mxfp4.ocp"}, 2, "--recipe-b applies"},
      {"global amax whose S_enc overflows", {"fake-quant", "IN/x.npy", "out/y.npy", "--format", "nvfp4",
                                             "--global-amax", "1e-45"}, 2, "2688/G overflows fp32"},
      {"global amax 0 (all-zero tensor)", {"fake-quant", "IN/x.npy", "out/y.npy", "--format", "nvfp4",
                                           "--global-amax", "0"}, 0, ""},
      {"recipe outside --format", {"underflow", "IN/dump.safetensors", "--format", "mxfp4", "--recipe", "nvfp4.te",
                                   "--out", "out/uf"}, 2, "which --format does not select"},
      {"scale rule with a recipe", {"underflow", "IN/dump.safetensors", "--recipe", "mxfp4.ocp", "--scale-rule",
                                    "ceil", "--out", "out/uf"}, 2, "--scale-rule"},
      {"scale rule without mxfp4", {"resq", "IN/dump.safetensors", "--format", "nvfp4", "--scale-rule", "ceil",
                                    "--out", "out/rq"}, 2, "--scale-rule ceil applies to mxfp4"},
      {"max-report negative", {"golden", "verify", "--suite", "IN/suite", "--candidate", "IN/candidate",
                               "--max-report=-1"},
       2, "--max-report"},
      {"empty value", {"fake-quant", "IN/x.npy", "out/y.npy", "--format="}, 2, "--format: 1 required TEXT missing"},
      {"empty value, separate", {"fake-quant", "IN/x.npy", "out/y.npy", "--format", ""}, 2,
       "--format: the value is empty"},
      {"empty list item", {"compare", "IN/dump.safetensors", "--format", "hif4,,mxfp4"}, 2, "empty item"},
      {"repeated transform key", {"underflow", "IN/dump.safetensors", "--transform", "rht:b=64,b=32", "--out",
                                  "out/uf"}, 2, "'b' is given twice"},
      {"trailing comma in a transform", {"underflow", "IN/dump.safetensors", "--transform", "rht:b=64,", "--out",
                                         "out/uf"}, 2, "ends with ','"},
      {"repeated pattern", {"resq", "IN/dump.safetensors", "--pattern", "2:4,2:4", "--out", "out/rq"}, 2,
       "given twice"},
      {"one pattern under two names", {"resq", "IN/dump.safetensors", "--pattern", "chan50,channel50", "--out",
                                       "out/rq"}, 2, "names channel50 twice"},
      {"repeated recipe", {"underflow", "IN/dump.safetensors", "--recipe", "mxfp4,mxfp4.ocp", "--out", "out/uf"}, 2,
       "names mxfp4.ocp twice"},
  });
}

}  // namespace
}  // namespace fp4emu
