// The command line as one object: every command registered (build_app), and
// the parse-and-run loop with its exit codes (run_main). main.cpp only calls
// run_main; tests/cli_hostile_test.cpp walks build_app() to try every option.
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "distributed.hpp"
#include "html_report.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/version.hpp"

namespace fp4emu::cli {
namespace {

// Rules every option with a value follows, whichever command declares it: an
// empty value is never taken as the default.
void add_common_checks(CLI::App& cmd) {
  const CLI::Validator non_empty(
      [](std::string& text) -> std::string {
        return text.empty() ? "the value is empty; give a value, or leave the option out for its default" : "";
      },
      "");
  for (CLI::Option* opt : cmd.get_options())
    if (opt->get_expected_min() > 0 || opt->get_positional()) opt->check(non_empty);
  for (CLI::App* sub : cmd.get_subcommands({})) add_common_checks(*sub);
}

// "fp4emu golden verify": the commands the parser had entered when it failed.
std::string command_path(const CLI::App& app) {
  std::string path = "fp4emu";
  const CLI::App* at = &app;
  while (true) {
    const std::vector<const CLI::App*> subs = at->get_subcommands([](const CLI::App*) { return true; });
    const CLI::App* next = nullptr;
    for (const CLI::App* s : subs)
      if (s->parsed()) next = s;
    if (!next) return path;
    path += " " + next->get_name();
    at = next;
  }
}

}  // namespace

std::unique_ptr<CliApp> build_app() {
  auto cli = std::make_unique<CliApp>();
  CLI::App& app = cli->app;
  Action& action = cli->action;
  app.set_version_flag("--version", std::string(kVersion));
  app.require_subcommand(1);
  add_formats(app, action);
  add_fake_quant(app, action);
  add_quantize(app, action);
  add_dequantize(app, action);
  add_compare(app, action);
  add_inspect(app, action);
  add_sample(app, action);
  add_gemm(app, action);
  add_golden(app, action);
  add_underflow(app, action);
  add_resq(app, action);
  add_identify(app, action);
  add_common_checks(app);
  return cli;
}

namespace {

// Parses and runs one command on this rank (the whole job when alone).
int run_command(int argc, char** argv) {
  const std::unique_ptr<CliApp> cli = build_app();
  CLI::App& app = cli->app;
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    fmt::print(stderr, "fp4emu: error: unknown command '{}'; commands: {} (fp4emu --help)\n",
               io::printable(argv[1]), names);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The message goes last, where a reader of the terminal looks first.
    // Every rank of a job parses the same line: rank 0 says it.
    if (dist::is_root())
      fmt::print(stderr, "{} --help lists the options\nfp4emu: error: {}\n", command_path(app),
                 io::printable(e.what(), 2000));
    return 2;
  }
  html::set_command_line(argc, argv);  // shown on --report pages
  try {
    try {
      return cli->action ? cli->action() : 0;
    } catch (...) {
      dist::fail(std::current_exception());  // other ranks hear of it; alone, rethrows
    }
  } catch (const dist::JobFailed& e) {
    if (dist::is_root()) fmt::print(stderr, "fp4emu: error (rank {} of {}): {}\n", e.rank, dist::size(), e.what());
    return e.exit_code;
  } catch (const InputError& e) {
    fmt::print(stderr, "fp4emu: error: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "fp4emu: error: out of memory; the input is too large for this machine\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fp4emu: internal error: {}\n", e.what());
    return 3;
  }
}

}  // namespace

int run_main(int argc, char** argv) {
  dist::start(&argc, &argv);  // MPI, when an mpirun/srun job started this process
  return dist::finish(run_command(argc, argv));
}

}  // namespace fp4emu::cli
