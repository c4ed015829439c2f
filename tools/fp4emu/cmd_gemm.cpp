// `fp4emu gemm A B D`: D = α·(Q(A)·Q(B)) + β·C + bias with a named
// accumulation model and CUTLASS's epilogue order (docs/gemm.md).
#include <fmt/format.h>

#include <cctype>
#include <limits>
#include <optional>
#include <utility>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/quant/packed_io.hpp"

namespace fp4emu::cli {
namespace {

struct Args {
  std::string a, b, out;
  std::string format, recipe, recipe_b, tail, round;
  SrFlags sr;  // --round stochastic: the operands' random bits
  std::string model;
  std::string dense;
  int blocks_per_step = 1;
  std::optional<float> alpha;
  std::string b_layout = "kn";
  std::optional<float> beta;
  std::string c, bias;
  std::string out_format, out_recipe;
  int threads = 0;
  std::string impl = "simd";
};

bool is_packed_file(const std::string& path) { return std::filesystem::path(path).extension() == ".safetensors"; }

// One operand: a packed .safetensors file as it is, or a .npy tensor,
// quantized here along k (A: axis 1, B: axis 0, or 1 as W n×k with
// --b-layout nk) unless it stays dense.
struct LoadedOperand {
  std::optional<PackedTensor> packed;
  std::optional<Tensor> dense;
  GemmOperand operand() const { return packed ? GemmOperand(*packed) : GemmOperand(*dense); }
};

LoadedOperand load_operand(const Args& a, const std::string& path, char side, const std::string& recipe,
                           BLayout layout) {
  const bool nk = side == 'B' && layout == BLayout::nk;
  LoadedOperand op;
  const bool keep_dense = a.dense.size() == 1 && std::toupper(static_cast<unsigned char>(a.dense[0])) == side;
  if (is_packed_file(path)) {
    if (keep_dense)
      throw InputError(fmt::format("--dense {}: {} is a packed file; give the dense values as .npy", side, io::printable(path)));
    op.packed = read_packed(path);
    if (!a.format.empty() && format_name(op.packed->format) != a.format)
      throw InputError(fmt::format("{} is packed as {}, but --format is {}", path, format_name(op.packed->format),
                                   a.format));
    return op;
  }
  InputDType dtype = InputDType::f32;
  Tensor t = load_tensor(path, &dtype);
  if (keep_dense) {
    op.dense = std::move(t);
    return op;
  }
  if (t.shape.size() != 2)
    throw InputError(fmt::format("{}: shape has rank {}; operand {} must be a matrix ({})", path, t.shape.size(),
                                 side, side == 'A' ? "m×k" : nk ? "n×k, --b-layout nk" : "k×n"));
  QuantOptions o;
  o.recipe = resolve_recipe_id(a.format, recipe);
  o.axis = side == 'A' || nk ? 1 : 0;
  o.input_dtype = dtype;
  if (!a.tail.empty()) {
    o.tail = parse_tail(a.tail);
    if (!o.tail) throw InputError(fmt::format("--tail '{}' is unknown; use pad or error", a.tail));
  }
  o.rounding = parse_round_flag(a.round);
  apply_sr_flags(a.sr, o.rounding, o.stochastic);  // both operands: the same Philox key (docs/gemm.md)
  try {
    op.packed = quantize(t, o);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} (operand {}, quantized along axis {}): {}", path, side, o.axis, e.what()));
  }
  return op;
}

int run(const Args& a) {
  GemmOptions o;
  const std::optional<GemmModel> model = parse_gemm_model(a.model);
  if (!model)
    throw InputError(fmt::format("--model '{}' is unknown; use exact, block_fp32, fma_fp32 or fast", a.model));
  o.model = *model;
  o.blocks_per_step = a.blocks_per_step;
  o.alpha = a.alpha;
  const std::optional<BLayout> layout = parse_b_layout(a.b_layout);
  if (!layout)
    throw InputError(fmt::format("--b-layout '{}' is unknown; use kn (B is k×n) or nk (B is W, n×k, nn.Linear's "
                                 "weight)",
                                 io::printable(a.b_layout)));
  o.b_layout = *layout;
  if (a.beta && a.c.empty())
    throw InputError("--beta scales the epilogue's source C, but no --c FILE is given; give --c or leave --beta out");
  o.threads = a.threads;
  if (a.impl == "scalar") o.impl = GemmImpl::scalar;
  else if (a.impl != "simd") throw InputError(fmt::format("--impl '{}' is unknown; use simd or scalar", a.impl));
  const bool dense_a = a.dense == "A" || a.dense == "a", dense_b = a.dense == "B" || a.dense == "b";
  if (!a.dense.empty() && !dense_a && !dense_b)
    throw InputError(fmt::format("--dense '{}' is unknown; use A or B (the operand kept unquantized)", a.dense));
  const bool any_npy_quantized = (!is_packed_file(a.a) && !dense_a) || (!is_packed_file(a.b) && !dense_b);
  if (any_npy_quantized && a.format.empty() && a.recipe.empty())
    throw InputError("no format given: use --format hif4|mxfp4|nvfp4 (or --recipe ID) to quantize the .npy operands");

  {  // random bits only with --round stochastic (which the check below ties to a quantized operand)
    StochasticBits unused;
    apply_sr_flags(a.sr, parse_round_flag(a.round), unused);
  }
  // Quantization options apply only to operands quantized here; given for
  // packed (or dense) operands they would be silently ignored.
  const bool quantize_a = !is_packed_file(a.a) && !dense_a, quantize_b = !is_packed_file(a.b) && !dense_b;
  if (!quantize_a && !quantize_b) {
    for (const auto& [flag, value] : {std::pair{"--recipe", &a.recipe}, {"--recipe-b", &a.recipe_b},
                                      {"--round", &a.round}, {"--tail", &a.tail}})
      if (!value->empty())
        throw InputError(fmt::format("{} applies to .npy operands quantized here, but neither A nor B is one (packed "
                                     "operands keep the recipe, rounding and tail they were quantized with); leave "
                                     "{} out",
                                     flag, flag));
  }
  if (!quantize_b && !a.recipe_b.empty())
    throw InputError(fmt::format("--recipe-b applies to a .npy B quantized here, but B ({}) is {}; leave --recipe-b out",
                                 a.b, dense_b ? "kept dense" : "packed"));
  if (!quantize_a && quantize_b && !a.recipe_b.empty() && !a.recipe.empty())
    throw InputError("--recipe applies to A (and to B without --recipe-b), but A is not quantized here and B has "
                     "--recipe-b; give only --recipe-b");

  const std::string out_ext = std::filesystem::path(a.out).extension().string();
  const bool quantize_out = !a.out_format.empty() || !a.out_recipe.empty();
  if (out_ext == ".safetensors" && !quantize_out)
    throw InputError(fmt::format("output {}: a packed output needs --out-format (or --out-recipe); or name it *.npy",
                                 io::printable(a.out)));
  if (out_ext != ".npy" && out_ext != ".safetensors")
    throw InputError(fmt::format("output {}: gemm writes C as .npy (fp32) or, with --out-format, as a packed "
                                 ".safetensors file",
                                 io::printable(a.out)));
  check_not_an_input(a.out, "output D", {a.a, a.b, a.c, a.bias});

  const LoadedOperand lhs = load_operand(a, a.a, 'A', a.recipe, o.b_layout);
  const LoadedOperand rhs = load_operand(a, a.b, 'B', a.recipe_b.empty() ? a.recipe : a.recipe_b, o.b_layout);
  // The epilogue's source C and bias: fp32 values (bf16 and fp16 widen exactly).
  std::optional<Tensor> source, bias;
  InputDType ignored = InputDType::f32;
  if (!a.c.empty()) {
    source = load_tensor(a.c, &ignored);
    o.c = &*source;
    o.beta = a.beta.value_or(1.0f);
  }
  if (!a.bias.empty()) {
    bias = load_tensor(a.bias, &ignored);
    o.bias = &*bias;
  }
  const auto with_file = [&](const auto& fn) {
    try {
      return fn();
    } catch (const InputError& e) {
      // The library names C or bias; the user needs the file too.
      const std::string what = e.what();
      if (what.starts_with("C (the epilogue") && !a.c.empty())
        throw InputError(fmt::format("--c {}: {}", io::printable(a.c), what));
      if (what.starts_with("bias") && !a.bias.empty())
        throw InputError(fmt::format("--bias {}: {}", io::printable(a.bias), what));
      throw;
    }
  };
  if (!quantize_out) {
    const Tensor d = with_file([&] { return gemm(lhs.operand(), rhs.operand(), o); });
    io::write_npy(a.out, io::from_f32(d.shape, d.data));
    return 0;
  }
  QuantOptions q;
  q.recipe = resolve_recipe_id(a.out_format, a.out_recipe);
  const PackedTensor c = with_file([&] { return gemm_quantized(lhs.operand(), rhs.operand(), o, q); });
  if (out_ext == ".safetensors") {
    write_packed(a.out, c);
  } else {
    const Tensor y = dequantize(c);
    io::write_npy(a.out, io::from_f32(y.shape, y.data));
  }
  return 0;
}

}  // namespace

void add_gemm(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "gemm", "Fake-quant GEMM D = alpha·(Q(A)·Q(B)) + beta·C + bias with a named accumulation model");
  cmd->add_option("A", args->a, "A (m×k): .npy (quantized here along k) or packed .safetensors blocked along axis 1")
      ->required();
  cmd->add_option("B", args->b,
                  "B (k×n): .npy (quantized here along k) or packed .safetensors blocked along axis 0; with "
                  "--b-layout nk: W (n×k), blocked along axis 1")
      ->required();
  cmd->add_option("D", args->out, "Output: .npy (fp32 m×n), or packed .safetensors with --out-format")->required();
  cmd->add_option("--b-layout", args->b_layout,
                  "How B is held: kn (k×n, default) or nk (W n×k, nn.Linear's weight; both operands K-major)");
  cmd->add_option("--format,-f", args->format, "Format of the quantized operands: hif4, mxfp4 or nvfp4");
  cmd->add_option("--recipe,-r", args->recipe, "Recipe of A (and of B unless --recipe-b), e.g. nvfp4.te");
  cmd->add_option("--recipe-b", args->recipe_b, "Recipe of B when it differs from A's (e.g. nvfp4.te_2d weights)");
  cmd->add_option("--model,-m", args->model,
                  "Accumulation model: exact | block_fp32 | fma_fp32 | fast (fast is not bit-reproducible)")
      ->required();
  cmd->add_option("--blocks-per-step", args->blocks_per_step,
                  "block_fp32: blocks summed exactly before each fp32 add (an MMA step; default 1)")
      ->check(integer_in(1, std::numeric_limits<int>::max()));
  cmd->add_option("--alpha", args->alpha, "Epilogue scale (NVFP4: folded with the per-tensor scales, TE's formula)")
      ->check(real_in({-std::numeric_limits<float>::max(), std::numeric_limits<float>::max(), false, false, true}));
  cmd->add_option("--c", args->c, "Epilogue source C (m×n .npy): D = alpha·acc + beta·C (+ bias)");
  cmd->add_option("--beta", args->beta, "Scale of --c (default 1); rounding order in docs/gemm.md \"Epilogue\"")
      ->check(real_in({-std::numeric_limits<float>::max(), std::numeric_limits<float>::max(), false, false, true}));
  cmd->add_option("--bias", args->bias, "Bias (.npy of n values, shape [n]) added to every row of D");
  cmd->add_option("--dense", args->dense, "Keep operand A or B unquantized (mixed precision, e.g. W4A16: --dense A)");
  cmd->add_option("--out-format", args->out_format, "Quantize C along its last axis to this format");
  cmd->add_option("--out-recipe", args->out_recipe, "Recipe for --out-format");
  cmd->add_option("--tail", args->tail, "k not a multiple of the block: pad | error (default: the recipe's)");
  cmd->add_option("--round", args->round,
                  "Element rounding of the operands quantized here, where the recipe allows it: rne | rha | rtz | "
                  "tiesToZero | stochastic (stochastic needs --seed)");
  add_sr_flags(cmd, args->sr,
               {.rbits_refusal = "gemm quantizes two operands; quantize each with `fp4emu quantize --rbits` (A with "
                                 "--axis 1, B with --axis 0) and pass the packed files, or give --seed S"});
  add_threads_option(cmd, args->threads, "Threads");
  cmd->add_option("--impl", args->impl, "simd (default) or scalar: the single-threaded reference form, same bits");
  cmd->footer(
      "Example: fp4emu gemm x.npy w.npy y.npy --format nvfp4 --recipe nvfp4.te --model block_fp32 "
      "--blocks-per-step 4\n"
      "         fp4emu gemm x.npy g.npy y.npy --format nvfp4 --model block_fp32 --round stochastic --seed 7\n"
      "nn.Linear (y = x·Wᵀ + b): fp4emu gemm x.npy W.npy y.npy --format mxfp4 --model exact --b-layout nk --bias "
      "b.npy\n"
      "Models are defined in docs/gemm.md. Packed inputs come from `fp4emu quantize` (A with --axis 1, B with "
      "--axis 0).");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
