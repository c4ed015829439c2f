// `fp4emu golden generate` and `fp4emu golden verify` (golden/README.md).
#include <fmt/format.h>

#include <cstdio>

#include "cli.hpp"
#include "distributed.hpp"
#include "report_pages.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/atomic_file.hpp"

namespace fp4emu::cli {
namespace {

struct GenerateArgs {
  std::string out;
  golden::GenerateOptions options;
};

int run_generate(const GenerateArgs& a) {
  golden::GenerateOptions options = a.options;
  const golden::GenerateOptions::Exchange ranks{dist::rank(), dist::size(), dist::gather};
  if (dist::size() > 1) options.exchange = &ranks;  // an MPI job: the cases shared, rank 0 writes
  const golden::GenerateSummary s = golden::generate_suite(a.out, options);
  fmt::print("wrote {} cases, {} files, {} bytes to {}\n", s.cases, s.files, s.bytes, a.out);
  return 0;
}

struct VerifyArgs {
  std::string suite, candidate, junit, report;
  golden::VerifyOptions options;
  bool json = false;
};

int run_verify(const VerifyArgs& a) {
  if (!a.junit.empty()) io::check_output_path(a.junit, "--junit");
  if (!a.report.empty() && a.report == a.junit)
    throw InputError(fmt::format("--report and --junit both name '{}'; give two files", a.report));
  html::check_report_path(a.report, {});
  golden::VerifyOptions options = a.options;
  const golden::GenerateOptions::Exchange ranks{dist::rank(), dist::size(), dist::gather};
  if (dist::size() > 1) options.exchange = &ranks;  // an MPI job: the cases shared, rank 0 reports
  const golden::VerifyReport r = golden::verify_suite(a.suite, a.candidate, options);
  if (!dist::is_root()) return 0;
  if (!a.junit.empty()) {
    const std::string xml = golden::report_junit(r);
    io::write_file_atomic(a.junit, {reinterpret_cast<const uint8_t*>(xml.data()), xml.size()});
  }
  if (!a.report.empty()) html::write_page(a.report, html::verify_page(r, a.options));
  fmt::print("{}", a.json ? golden::report_json(r) : golden::report_text(r));
  return r.exit_code();
}

// --family, --case, --recipe: the same selection for generate and verify.
void add_filter_options(CLI::App* cmd, std::vector<std::string>& families, std::vector<std::string>& cases,
                        std::vector<std::string>* recipes) {
  add_list_option(cmd, "--family", families,
                  "Only cases whose family matches this glob (repeatable), e.g. 'tail*' or codes", false);
  add_list_option(cmd, "--case", cases,
                  "Only cases whose id (<recipe>/<case>) matches this glob (repeatable; `*` also matches '/'), e.g. "
                  "'mxfp4.ocp/random_*' or '*/special'",
                  false);
  if (recipes) add_list_option(cmd, "--recipe", *recipes, "Only cases of these recipe ids (comma-separated)", true);
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
  add_filter_options(gen, g->options.families, g->options.cases, nullptr);
  gen->add_option("--level", g->options.level, "1 edges + small random (seconds), 2 + larger random, 3 + every bf16 "
                                               "value through every position (GBs)")
      ->default_val(1)
      ->check(integer_in(1, 3));
  gen->add_option("--seed", g->options.seed, "Seed of the random cases")->default_val(1)->check(any_seed());
  add_threads_option(gen, g->options.threads, "Threads; the suite's bytes do not depend on it");
  gen->footer("Example: fp4emu golden generate --out suite --recipes mxfp4.ocp,nvfp4.te --level 2 --seed 7\n"
              "         fp4emu golden generate --out suite --recipe mxfp4.rceil --family 'tail*'");
  gen->callback([&action, g] { action = [g] { return run_generate(*g); }; });

  auto v = std::make_shared<VerifyArgs>();
  auto* ver = golden->add_subcommand(
      "verify",
      "Compare a kernel's outputs with a golden suite, bit for bit, and say why they differ. Each case is PASS (every "
      "output file equal), FAIL (a mismatch; `why:` classifies it), PARTIAL (the files present are equal, some are "
      "missing), NOT RUN (outside --family/--case/--recipe, or with --skip-missing none of its files present), ERROR "
      "(a bad or missing candidate file) or STALE (the suite was made with another bits version of the recipe: "
      "regenerate it). An expect-error case (tail_error) passes on the kernel's refusal: an error.txt in its "
      "directory and no output. Exit 0 all selected cases pass (PARTIAL too with --skip-missing), 1 a mismatch, 2 a "
      "bad suite, candidate or option, a missing file or a stale case");
  ver->add_option("--suite", v->suite, "Suite directory written by `golden generate`")->required();
  ver->add_option("--candidate", v->candidate, "Directory with the kernel's outputs under the suite's file names")
      ->required();
  ver->add_option("--max-report", v->options.max_report,
                  "Mismatches listed in detail, block by block, root cause first (all are counted); 0 or more")
      ->default_val(20)
      ->check(integer_in(0, 1 << 30, "0 lists none"));
  ver->add_flag("--json", v->json, "Machine-readable report on stdout");
  ver->add_option("--junit", v->junit, "Also write a JUnit XML report to this file (one testcase per suite case)");
  html::add_report_option(ver, v->report);
  ver->add_flag("--strict", v->options.strict,
                "Also compare element codes (and HiF4 L2/L3 bits) of NaN-scale blocks, fp4emu's convention");
  ver->add_flag("--skip-missing", v->options.skip_missing,
                "A case missing some output files is PARTIAL, not an error (e.g. a kernel that writes no "
                "dequant.npy); one missing all is NOT RUN");
  add_filter_options(ver, v->options.filter.families, v->options.filter.cases, &v->options.filter.recipes);
  add_threads_option(ver, v->options.threads,
                     "Cases (and the suite's digests) in parallel, each thread holding one case's arrays; the report "
                     "does not depend on it");
  ver->footer("Examples:\n  fp4emu golden verify --suite golden/suite --candidate out --max-report 50\n"
              "  fp4emu golden verify --suite golden/suite --candidate out --recipe mxfp4.rceil --skip-missing "
              "--junit verify.xml");
  ver->callback([&action, v] { action = [v] { return run_verify(*v); }; });
}

}  // namespace fp4emu::cli
