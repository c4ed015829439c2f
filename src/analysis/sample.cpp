// Synthetic LLM-like activation dumps; the model is described in sample.hpp.
#include "fp4emu/analysis/sample.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include <fmt/format.h>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"

namespace fp4emu {

namespace {

// Bump when the generated values change, so a dump records which generator
// made it (the tool version is left out: it would change the bundled bytes).
constexpr const char* kGeneratorVersion = "1";

constexpr double kHotMin = 20.0, kHotMax = 100.0;  // hot channels, x body rms (sample.hpp, G2)
constexpr int64_t kMassiveDims = 2;                // "1-2 fixed dimensions" (§7.3 G3)
constexpr double kMassivePostNorm = 200.0;         // token 0 of qkv_in / gateup_in, x body rms
constexpr double kMassiveDown = 2000.0;            // token 0 of down_in, x body rms
// sqrt(E[silu(a)^2]) for a ~ N(0, 1) (numerical integration): makes the
// down_in body unit-rms before the channel scales.
constexpr double kSiluRms = 0.596469;

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// SplitMix64 (Steele, Lea, Flood 2014) with Box-Muller normals in double.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_mix(state_ += 0x9E3779B97F4A7C15ull); }
  // Uniform on (0, 1]: never 0, so its log is finite.
  double uniform_open0() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform_open0()));
    const double t = 2.0 * std::numbers::pi * uniform_open0();
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }
  // Student-t with 6 degrees of freedom scaled to unit variance (variance of
  // t_nu is nu / (nu - 2)); chi^2_6 = -2 ln(u1 u2 u3).
  double student_t6() {
    const double z = normal();
    const double chi2 = -2.0 * std::log(uniform_open0() * uniform_open0() * uniform_open0());
    return z / std::sqrt(chi2 / 6.0) / std::sqrt(1.5);
  }
  // 0 <= value < n (modulo bias below 2^-40 for the widths used here).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// Independent streams: one per (layer, kind), one per channel set.
uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  return splitmix64_mix(seed ^ splitmix64_mix(stream + 0x632BE59BD9B4E019ull));
}
constexpr uint64_t kHiddenChannelStream = 1, kIntermediateChannelStream = 2;
uint64_t tensor_stream(int64_t layer, SampleKind kind) {
  return 16 + static_cast<uint64_t>(layer) * 4 + static_cast<uint64_t>(kind);
}

// The persistent channels of one width: `hot` hot channels then the massive
// dims, all distinct, with the hot magnitudes (log-uniform) and signs.
struct ChannelSet {
  std::vector<int64_t> hot, massive;
  std::vector<double> hot_value;  // signed, x body rms
  std::vector<double> massive_sign;
};

ChannelSet channel_set(const SampleOptions& o, int64_t width, uint64_t stream) {
  Rng rng(stream_seed(o.seed, stream));
  std::vector<int64_t> dims(static_cast<size_t>(width));
  std::iota(dims.begin(), dims.end(), 0);
  const int64_t massive = std::min(kMassiveDims, width);
  const int64_t take = o.outliers + massive;
  for (int64_t i = 0; i < take; ++i) std::swap(dims[i], dims[i + rng.below(width - i)]);  // partial Fisher-Yates
  ChannelSet c;
  for (int64_t i = 0; i < o.outliers; ++i) {
    c.hot.push_back(dims[i]);
    const double mag = kHotMin * std::exp(std::log(kHotMax / kHotMin) * (rng.uniform_open0()));
    c.hot_value.push_back((rng.next() & 1) ? -mag : mag);
  }
  for (int64_t i = o.outliers; i < take; ++i) {
    c.massive.push_back(dims[i]);
    c.massive_sign.push_back((rng.next() & 1) ? -1.0 : 1.0);
  }
  return c;
}

std::string join(const std::vector<int64_t>& v) { return fmt::format("{}", fmt::join(v, ",")); }

}  // namespace

const char* sample_kind_name(SampleKind kind) {
  switch (kind) {
    case SampleKind::qkv_in: return "qkv_in";
    case SampleKind::o_in: return "o_in";
    case SampleKind::gateup_in: return "gateup_in";
    case SampleKind::down_in: return "down_in";
  }
  return "?";
}

int64_t sample_intermediate(const SampleOptions& o) {
  if (o.intermediate != 0) return o.intermediate;
  // SwiGLU models use about 8/3 hidden; a multiple of 64 keeps whole blocks.
  return (o.hidden * 8 / 3 + 63) / 64 * 64;
}

void check_sample_options(const SampleOptions& o) {
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  auto check = [&](const char* flag, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw InputError(fmt::format("{} {} is out of range; use {}..{}", flag, v, lo, hi));
  };
  check("--layers", o.layers, 1, 4096);
  check("--tokens", o.tokens, 1, kMaxDim);
  check("--hidden", o.hidden, 1, kMaxDim);
  if (o.intermediate != 0) check("--intermediate", o.intermediate, 1, kMaxDim);
  const int64_t inter = sample_intermediate(o);
  const int64_t width = std::min(o.hidden, inter);
  const int64_t room = width - std::min(kMassiveDims, width);
  if (o.outliers < 0 || o.outliers > room)
    throw InputError(fmt::format("--outliers {} is out of range; use 0..{} (the narrower of hidden {} and "
                                 "intermediate {}, less {} massive-activation dims)",
                                 o.outliers, room, o.hidden, inter, std::min(kMassiveDims, width)));
  // One tensor is generated in memory at a time: cap it at 2^32 elements.
  const int64_t widest = std::max(o.hidden, inter);
  if (o.tokens > (int64_t{1} << 32) / widest)
    throw InputError(fmt::format("--tokens {} x width {} is more than 2^32 elements per tensor; use fewer "
                                 "tokens",
                                 o.tokens, widest));
}

std::vector<SampleTensor> sample_layout(const SampleOptions& o) {
  check_sample_options(o);
  const int64_t inter = sample_intermediate(o);
  std::vector<SampleTensor> out;
  for (int64_t l = 0; l < o.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    out.push_back({p + "self_attn.qkv_proj.input", SampleKind::qkv_in, l, {o.tokens, o.hidden}});
    out.push_back({p + "self_attn.o_proj.input", SampleKind::o_in, l, {o.tokens, o.hidden}});
    out.push_back({p + "mlp.gate_up_proj.input", SampleKind::gateup_in, l, {o.tokens, o.hidden}});
    out.push_back({p + "mlp.down_proj.input", SampleKind::down_in, l, {o.tokens, inter}});
  }
  return out;
}

std::map<std::string, std::string> sample_metadata(const SampleOptions& o) {
  check_sample_options(o);
  const int64_t inter = sample_intermediate(o);
  const ChannelSet h = channel_set(o, o.hidden, kHiddenChannelStream);
  const ChannelSet d = channel_set(o, inter, kIntermediateChannelStream);
  return {
      {"generator", fmt::format("fp4emu sample (generator {})", kGeneratorVersion)},
      {"seed", std::to_string(o.seed)},
      {"layers", std::to_string(o.layers)},
      {"tokens", std::to_string(o.tokens)},
      {"hidden", std::to_string(o.hidden)},
      {"intermediate", std::to_string(inter)},
      {"outliers", std::to_string(o.outliers)},
      {"hot_channels_hidden", join(h.hot)},
      {"massive_dims_hidden", join(h.massive)},
      {"hot_channels_intermediate", join(d.hot)},
      {"massive_dims_intermediate", join(d.massive)},
      {"kinds", "qkv_in=self_attn.qkv_proj.input o_in=self_attn.o_proj.input "
                "gateup_in=mlp.gate_up_proj.input down_in=mlp.down_proj.input"},
      {"dtype", "bf16"},
  };
}

std::vector<uint16_t> generate_sample_tensor(const SampleOptions& o, const SampleTensor& t) {
  check_sample_options(o);
  const int64_t tokens = t.shape.at(0), width = t.shape.at(1);
  const bool down = t.kind == SampleKind::down_in;
  const bool plain = t.kind == SampleKind::o_in;
  ChannelSet set;
  if (!plain) set = channel_set(o, width, down ? kIntermediateChannelStream : kHiddenChannelStream);
  Rng rng(stream_seed(o.seed, tensor_stream(t.layer, t.kind)));

  const double sigma = plain ? 0.25 : 0.5;
  std::vector<double> channel_scale(static_cast<size_t>(width));
  for (double& s : channel_scale) s = std::exp(sigma * rng.normal());
  // Hot channels keep their dims and signs in every layer; their size varies
  // by up to 25 % from layer to layer, staying within [kHotMin, kHotMax].
  std::vector<double> hot_value(set.hot_value);
  for (double& v : hot_value) {
    const double mag = std::fabs(v) * std::exp(std::log(1.25) * (2.0 * rng.uniform_open0() - 1.0));
    v = std::copysign(std::clamp(mag, kHotMin, kHotMax), v);
  }
  const double massive_gain = down ? kMassiveDown : kMassivePostNorm;

  std::vector<uint16_t> out(static_cast<size_t>(tokens * width));
  std::vector<double> row(static_cast<size_t>(width));
  for (int64_t tok = 0; tok < tokens; ++tok) {
    for (int64_t j = 0; j < width; ++j) {
      double body;
      if (plain) {
        body = rng.normal();
      } else if (down) {
        const double a = rng.normal();
        const double b = rng.normal();
        body = a / (1.0 + std::exp(-a)) * b / kSiluRms;
      } else {
        body = rng.student_t6();
      }
      row[j] = body * channel_scale[j];
    }
    for (size_t h = 0; h < set.hot.size(); ++h) row[set.hot[h]] = hot_value[h] * (1.0 + 0.1 * rng.normal());
    if (tok == 0) {
      for (size_t m = 0; m < set.massive.size(); ++m)
        row[set.massive[m]] = set.massive_sign[m] * massive_gain * (1.0 + 0.05 * rng.normal());
    }
    for (int64_t j = 0; j < width; ++j) out[tok * width + j] = bf16_encode(row[j], Rounding::rne);
  }
  return out;
}

}  // namespace fp4emu
