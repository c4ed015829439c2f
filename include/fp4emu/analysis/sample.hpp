#pragma once
// Seeded synthetic activation dumps that look like an LLM's linear-layer
// inputs (docs/analysis.md §1): per layer the four distinct activation
// tensors, in BF16, named as vLLM names its fused projections:
//
//   kind       tensor name                                  shape
//   qkv_in     model.layers.{i}.self_attn.qkv_proj.input    [tokens, hidden]
//   o_in       model.layers.{i}.self_attn.o_proj.input      [tokens, hidden]
//   gateup_in  model.layers.{i}.mlp.gate_up_proj.input      [tokens, hidden]
//   down_in    model.layers.{i}.mlp.down_proj.input         [tokens, intermediate]
//
// What each kind holds:
//   qkv_in, gateup_in (G2, post-RMSNorm): Student-t (nu = 6, unit variance)
//     body times a per-channel lognormal scale (sigma 0.5); `outliers`
//     persistent hot channels, the same dims and signs in every layer, at
//     20-100x the body rms (varying up to 25 % between layers and about 10 %
//     between tokens); token 0 carries massive activations (G3) in 2 fixed
//     dims at about 200x.
//   o_in (G5): Gaussian times a lognormal channel scale (sigma 0.25).
//   down_in (G4): silu(a) * b with a, b ~ N(0, 1), a lognormal channel scale
//     (sigma 0.5), `outliers` hot channels of its own (same dims in every
//     layer), and massive activations at about 2000x in 2 fixed dims of token 0.
//
// Randomness: SplitMix64 streams, one per tensor (keyed by seed, layer and
// kind) plus one for the channel sets, so a tensor does not depend on the
// others; normals by Box-Muller in double; values rounded to BF16 by RNE.
// The same options give the same bytes on every run.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fp4emu {

struct SampleOptions {
  uint64_t seed = 0;
  int64_t layers = 4;
  int64_t tokens = 64;
  int64_t hidden = 1024;
  int64_t intermediate = 0;  // 0: 8/3 hidden rounded up to a multiple of 64
  int64_t outliers = 4;      // hot channels in the hidden dims, and in the intermediate dims
};

enum class SampleKind { qkv_in, o_in, gateup_in, down_in };
const char* sample_kind_name(SampleKind kind);

struct SampleTensor {
  std::string name;
  SampleKind kind;
  int64_t layer;
  std::vector<int64_t> shape;  // [tokens, width]
};

// InputError naming the option (--layers, --tokens, --hidden, --intermediate,
// --outliers) and the accepted range.
void check_sample_options(const SampleOptions& options);
// The intermediate width used (options.intermediate, or its default).
int64_t sample_intermediate(const SampleOptions& options);
// The tensors, in file order: layer by layer, qkv_in, o_in, gateup_in, down_in.
std::vector<SampleTensor> sample_layout(const SampleOptions& options);
// The generator and its parameters, for the file's __metadata__.
std::map<std::string, std::string> sample_metadata(const SampleOptions& options);
// BF16 bit patterns of one tensor, row-major [tokens, width].
std::vector<uint16_t> generate_sample_tensor(const SampleOptions& options, const SampleTensor& tensor);

}  // namespace fp4emu
