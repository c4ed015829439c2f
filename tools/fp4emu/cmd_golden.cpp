// `fp4emu golden generate` and `fp4emu golden verify` (golden/README.md).
#include <fmt/format.h>

#include <cstdio>

#include "cli.hpp"
#include "fp4emu/golden/suite.hpp"

namespace fp4emu::cli {
namespace {

struct GenerateArgs {
  std::string out;
  golden::GenerateOptions options;
};

int run_generate(const GenerateArgs& a) {
  const golden::GenerateSummary s = golden::generate_suite(a.out, a.options);
  fmt::print("wrote {} cases, {} files, {} bytes to {}\n", s.cases, s.files, s.bytes, a.out);
  return 0;
}

struct VerifyArgs {
  std::string suite, candidate;
  golden::VerifyOptions options;
  bool json = false;
};

int run_verify(const VerifyArgs& a) {
  const golden::VerifyReport r = golden::verify_suite(a.suite, a.candidate, a.options);
  fmt::print("{}", a.json ? golden::report_json(r) : golden::report_text(r));
  return r.exit_code();
}

}  // namespace

void add_golden(CLI::App& app, Action& action) {
  auto* golden = app.add_subcommand("golden", "Golden vectors for kernel CI: generate a suite, verify a kernel's outputs");
  golden->require_subcommand(1);
  golden->footer("Examples:\n  fp4emu golden generate --out suite --level 1\n"
                 "  fp4emu golden verify --suite suite --candidate kernel_out");

  auto g = std::make_shared<GenerateArgs>();
  auto* gen = golden->add_subcommand("generate", "Write a golden suite with the reference quantizers (deterministic)");
  gen->add_option("--out", g->out, "Suite directory (created; a previous suite there is replaced)")->required();
  add_list_option(gen, "--formats", g->options.formats, "Formats to include: hif4,mxfp4,nvfp4 (default: all)", true);
  add_list_option(gen, "--recipes,--recipe", g->options.recipes,
                  "Recipe ids, or 'all' (default: hif4.v14,hif4.a6,mxfp4.ocp,mxfp4.rceil,nvfp4.te)", true);
  gen->add_option("--level", g->options.level, "1 edges + small random (seconds), 2 + larger random, 3 + every bf16 "
                                               "value through every position (GBs)")
      ->default_val(1)
      ->check(integer_in(1, 3));
  gen->add_option("--seed", g->options.seed, "Seed of the random cases")->default_val(1)->check(any_seed());
  add_threads_option(gen, g->options.threads, "Threads; the suite's bytes do not depend on it");
  gen->footer("Example: fp4emu golden generate --out suite --recipes mxfp4.ocp,nvfp4.te --level 2 --seed 7");
  gen->callback([&action, g] { action = [g] { return run_generate(*g); }; });

  auto v = std::make_shared<VerifyArgs>();
  auto* ver = golden->add_subcommand("verify", "Compare a kernel's outputs with a golden suite, bit for bit "
                                               "(exit 0 pass, 1 mismatch, 2 bad suite or candidate)");
  ver->add_option("--suite", v->suite, "Suite directory written by `golden generate`")->required();
  ver->add_option("--candidate", v->candidate, "Directory with the kernel's outputs under the suite's file names")
      ->required();
  ver->add_option("--max-report", v->options.max_report, "Mismatches listed in detail")
      ->default_val(20)
      ->check(integer_in(0, 1 << 30, "0 lists none"));
  ver->add_flag("--json", v->json, "Machine-readable report");
  ver->add_flag("--strict", v->options.strict,
                "Also compare element codes (and HiF4 L2/L3 bits) of NaN-scale blocks, fp4emu's convention");
  ver->add_flag("--skip-missing", v->options.skip_missing,
                "Skip suite files the candidate does not have (e.g. a kernel that writes no dequant.npy)");
  ver->footer("Example: fp4emu golden verify --suite golden/suite --candidate out --max-report 50");
  ver->callback([&action, v] { action = [v] { return run_verify(*v); }; });
}

}  // namespace fp4emu::cli
