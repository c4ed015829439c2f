// fp4emu: bit-exact emulator for HiF4, MXFP4 and NVFP4.
// Exit codes: 0 success, 1 verification mismatch, 2 usage or input error.
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/version.hpp"

int main(int argc, char** argv) {
  using namespace fp4emu;
  CLI::App app{"fp4emu: bit-exact emulator and reference for HiF4, MXFP4 and NVFP4 block formats"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  cli::Action action;
  cli::add_formats(app, action);
  cli::add_fake_quant(app, action);
  cli::add_quantize(app, action);
  cli::add_dequantize(app, action);
  cli::add_compare(app, action);
  cli::add_inspect(app, action);
  cli::add_sample(app, action);
  cli::add_gemm(app, action);
  cli::add_golden(app, action);
  cli::add_underflow(app, action);
  cli::add_resq(app, action);
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    fmt::print(stderr, "fp4emu: error: unknown command '{}'; commands: {} (fp4emu --help)\n", argv[1], names);
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
    app.exit(e);
    return 2;
  }
  try {
    return action ? action() : 0;
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
