// The case families of a golden suite (golden/README.md "Case families").
//
// Edge inputs are not derived from formulas of each recipe: they are searched
// with the reference itself (Probe), so they sit exactly where the recipe's own
// arithmetic changes its answer. A scale step is the smallest amax on the input
// grid whose scale code differs from the code just below; a "representable
// value" is the decoded value of a code under a fixed scale; a tie is the
// midpoint of two neighbouring representable values. The golden outputs are
// whatever the reference computes for these inputs.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/reference.hpp"
#include "generator.hpp"

namespace fp4emu::golden {

// ---- Rng -------------------------------------------------------------------------

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed, const std::string& stream) {
  uint64_t x = seed ^ fnv1a(stream);
  for (uint64_t& s : s_) s = splitmix64(x);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

int64_t Rng::below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

double Rng::normal() {
  for (;;) {
    const double u = 2.0 * uniform() - 1.0, v = 2.0 * uniform() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * portable_log(s) / s);
  }
}

double Rng::student_t3() {
  const double z = normal();
  const double a = normal(), b = normal(), c = normal();
  return z / std::sqrt((a * a + b * b + c * c) / 3.0);
}

// ln x = e ln 2 + 2 atanh(z), z = (m - 1)/(m + 1), m in [1/sqrt2, sqrt2): |z| <
// 0.172, so 12 odd terms reach double precision. frexp and ldexp are exact.
double portable_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  const double z = (m - 1.0) / (m + 1.0), z2 = z * z;
  double term = z, sum = 0.0;
  for (int k = 1; k <= 25; k += 2) {
    sum += term / k;
    term *= z2;
  }
  return e * 0.69314718055994531 + 2.0 * sum;
}

// ---- InputGrid ---------------------------------------------------------------------

float InputGrid::round(double x) const {
  if (dtype == InputDType::bf16) return bf16_rne(x);
  const double max = std::numeric_limits<float>::max();
  if (x > max) return std::numeric_limits<float>::infinity();
  if (x < -max) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(x);
}

uint32_t InputGrid::ordinal(float x) const {
  const uint32_t b = std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu;
  return dtype == InputDType::bf16 ? b >> 16 : b;
}

float InputGrid::from_ordinal(uint32_t o) const {
  return std::bit_cast<float>(dtype == InputDType::bf16 ? o << 16 : o);
}

uint32_t InputGrid::max_ordinal() const { return dtype == InputDType::bf16 ? 0x7F7Fu : 0x7F7FFFFFu; }

float InputGrid::next_up(float x) const {
  if (x < 0.0f) return -next_down(-x);
  const uint32_t o = ordinal(x);
  return o >= max_ordinal() ? std::numeric_limits<float>::infinity() : from_ordinal(o + 1);
}

float InputGrid::next_down(float x) const {
  if (x < 0.0f || (x == 0.0f && std::signbit(x))) return -next_up(-x);
  const uint32_t o = ordinal(x);
  return o == 0 ? -from_ordinal(1) : from_ordinal(o - 1);
}

uint32_t InputGrid::bits(float x) const {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  return dtype == InputDType::bf16 ? b >> 16 : b;
}

// ---- Probe -----------------------------------------------------------------------------

QuantOptions golden_options(const Recipe& recipe, InputDType dtype) {
  QuantOptions o;
  o.recipe = std::string(recipe.id);
  o.axis = -1;
  o.input_dtype = dtype;
  // Golden vectors come from the scalar reference, never the fast path
  // (docs/architecture.md §1): a fast-path bug cannot leak into them.
  o.impl = Impl::reference;
  return o;
}

Probe::Probe(const Recipe& recipe, const QuantOptions& options, InputGrid grid)
    : options_(options), grid_(grid), block_(block_size(recipe.format)) {
  options_.axis = -1;
  options_.nibble_order = NibbleOrder::low_first;  // element p in byte p/2, nibble p&1
  options_.tail.reset();
}

PackedTensor Probe::quantize_block(const std::vector<float>& x) const {
  Tensor t;
  t.shape = {1, block_};
  t.data = x;
  return quantize(t, options_);
}

uint32_t Probe::word(const PackedTensor& p) const {
  return reference::load_scale(p.format, p.scales.data(), p.scale_bit_order);
}

float Probe::decode_as(const PackedTensor& p, int pos, uint8_t code) const {
  PackedTensor q = p;
  uint8_t& byte = q.codes[pos / 2];
  byte = (pos & 1) ? static_cast<uint8_t>((byte & 0x0F) | (code << 4)) : static_cast<uint8_t>((byte & 0xF0) | code);
  return dequantize(q, kReferenceDequant).data[pos];
}

std::vector<float> Probe::dequantize_block(const PackedTensor& p) const {
  return dequantize(p, kReferenceDequant).data;
}

// The scale code as a function of the amax of a block whose other lanes are
// zero, walked from the smallest positive input to the largest finite one: a
// coarse scan (one binade of the input grid per probe) finds the next point
// with another code, bisection the exact step. Codes need not be monotone
// (V14-noclip is NaN at both ends; ggml's E8M0 cast wraps); a change and
// change back inside one binade would go unseen.
std::vector<ScaleStep> find_scale_steps(const Probe& probe) {
  const InputGrid& g = probe.grid();
  std::vector<float> x(probe.block(), 0.0f);
  auto code_at = [&](uint32_t ord) {
    x[0] = g.from_ordinal(ord);
    return probe.scale_code(probe.quantize_block(x));
  };
  const uint32_t binade = g.dtype == InputDType::bf16 ? 1u << 7 : 1u << 23;
  const uint32_t end = g.max_ordinal();
  std::vector<ScaleStep> steps;
  uint32_t cur = 1;
  uint32_t code_cur = code_at(cur);
  while (cur < end) {
    uint32_t lo = cur, hi = std::min(end, cur + binade);
    while (code_at(hi) == code_cur && hi < end) {
      lo = hi;
      hi = std::min(end, hi + binade);
    }
    if (code_at(hi) == code_cur) break;
    while (hi - lo > 1) {  // code(lo) == code_cur, code(hi) != code_cur
      const uint32_t mid = lo + (hi - lo) / 2;
      (code_at(mid) == code_cur ? lo : hi) = mid;
    }
    const uint32_t code_hi = code_at(hi);
    steps.push_back({code_cur, code_hi, g.from_ordinal(hi)});
    cur = hi;
    code_cur = code_hi;
  }
  return steps;
}

namespace {

// ---- shared helpers ----------------------------------------------------------------------

using Block = std::vector<float>;

// A deterministic spread of magnitudes in (0, 1], alternating sign: lane
// fillers that stay below a block's amax.
double frac(int j) {
  const double m = 1.0 - static_cast<double>(j % 64) / 64.0;
  return (j % 2 ? -1.0 : 1.0) * m * m * m;
}

bool is_nan_scale(const Probe& probe, const PackedTensor& p) {
  const std::vector<float> v = probe.dequantize_block(p);
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isnan(f); });
}

CaseSpec edge_case(const Recipe& r, const QuantOptions& o, std::string name, std::string family,
                   std::string probes, std::vector<Block> blocks) {
  CaseSpec c;
  c.id = fmt::format("{}/{}", r.id, name);
  c.family = std::move(family);
  c.probes = std::move(probes);
  c.recipe = &r;
  c.options = o;
  const int64_t block = block_size(r.format);
  c.shape = {static_cast<int64_t>(blocks.size()), block};
  c.blocks_txt = true;
  auto flat = std::make_shared<std::vector<float>>();
  for (const Block& b : blocks) flat->insert(flat->end(), b.begin(), b.end());
  c.make = [flat] { return *flat; };
  return c;
}

// The options of an edge case. NVFP4 edge cases fix the per-tensor amax so
// that every block sees the same tensor scale whatever the other blocks hold:
// G = 2688 = 6 * 448 gives S_enc = S_dec = 1 (docs/spec/nvfp4.md §8 EX-N1).
QuantOptions edge_options(const Recipe& r, InputDType dtype, float nv_global = 2688.0f) {
  QuantOptions o = golden_options(r, dtype);
  if (r.format == Format::nvfp4) o.global_amax = nv_global;
  return o;
}

InputDType natural_dtype(const Recipe& r) { return r.bf16_input_only ? InputDType::bf16 : InputDType::f32; }

// The codes the steps pass through, lowest first, with the largest amax of each.
struct ScaleCode {
  uint32_t code;
  float top_amax;  // largest amax on the grid giving `code`
};
std::vector<ScaleCode> scale_codes(const std::vector<ScaleStep>& steps, const InputGrid& g) {
  std::vector<ScaleCode> codes;
  if (steps.empty()) return codes;
  for (size_t i = 0; i < steps.size(); ++i) codes.push_back({steps[i].code_below, g.next_down(steps[i].amax)});
  codes.push_back({steps.back().code_at, g.from_ordinal(g.max_ordinal())});
  return codes;
}

// `n` indices spread evenly over [0, size), first and last included; all when
// n >= size.
std::vector<size_t> spread(size_t size, size_t n) {
  std::vector<size_t> idx;
  if (size == 0) return idx;
  if (n >= size || n < 2) {
    for (size_t i = 0; i < size; ++i) idx.push_back(i);
    return idx;
  }
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (k * (size - 1) + (n - 1) / 2) / (n - 1);
    if (idx.empty() || idx.back() != i) idx.push_back(i);
  }
  return idx;
}

// Replaces each anchor by its own decoded value when that keeps the scale word:
// the anchor then lies on the grid, so the largest representable value of
// the block is itself a reachable input.
Block snap_anchors(const Probe& probe, const Block& t, const std::vector<int>& anchors) {
  const PackedTensor q = probe.quantize_block(t);
  const std::vector<float> d = probe.dequantize_block(q);
  Block s = t;
  for (int a : anchors)
    if (std::isfinite(d[a]) && d[a] != 0.0f) s[a] = probe.grid().round(d[a]);
  if (probe.word(probe.quantize_block(s)) == probe.word(q)) return s;
  return t;
}

// ---- codes: every representable value and every tie, at several scales -------------------

// A block template: anchors fix the scale (and, for HiF4, the L2/L3 bits of
// every group); each free slot takes values up to the magnitude of the anchor
// that governs it, which leaves the scale word unchanged.
struct Template {
  Block values;
  std::vector<int> anchors;
  std::vector<std::pair<int, int>> slots;  // position, governing anchor position
};

Template make_template(const Recipe& r, float a, size_t variant, const InputGrid& g) {
  const int block = block_size(r.format);
  Template t;
  t.values.assign(block, 0.0f);
  if (r.format != Format::hif4) {
    const int p0 = static_cast<int>((variant * 7) % block);
    t.values[p0] = variant % 2 ? -a : a;
    t.anchors = {p0};
    for (int p = 0; p < block; ++p)
      if (p != p0) t.slots.push_back({p, p0});
    return t;
  }
  // HiF4 (docs/spec/hif4.md §3): one anchor per 4-group. The L2 group j takes pattern
  // (j + variant) % 4: both 4-groups at a, both at a/2, both at a/4, or a/2
  // then a/4, so the free slots see several (b, c) bit combinations.
  static constexpr double kGroupScale[4][2] = {{1.0, 1.0}, {0.5, 0.5}, {0.25, 0.25}, {0.5, 0.25}};
  for (int k = 0; k < 16; ++k) {
    const float m = g.round(a * kGroupScale[(k / 2 + variant) % 4][k % 2]);
    const int pos = 4 * k + (k + static_cast<int>(variant)) % 4;
    t.values[pos] = k % 2 ? -m : m;
    t.anchors.push_back(pos);
    for (int i = 0; i < 4; ++i)
      if (4 * k + i != pos) t.slots.push_back({4 * k + i, pos});
  }
  return t;
}

// One lane of an edge block: its input and, in a stochastic case, its random byte.
struct Lane {
  float x;
  uint8_t r = 0;
};
// The lanes to place in the slots sharing one grid: `grid` the representable
// magnitudes up to `bound` (the governing anchor), ascending, 0 first.
using LaneQueue = std::function<std::vector<Lane>(const std::vector<float>& grid, float bound)>;

// Edge blocks and, for a stochastic case, the random byte of each lane.
struct EdgeBlocks {
  std::vector<Block> blocks;
  std::vector<std::vector<uint8_t>> rbits;
};

// Appends v and -v (with random byte r) when v is finite and within `bound`.
void both_signs(std::vector<Lane>& lanes, float v, float bound, uint8_t r = 0) {
  if (!std::isfinite(v) || std::fabs(v) > bound) return;
  lanes.push_back({v, r});
  lanes.push_back({-v, r});
}

// The template's blocks: each free slot takes the next lane of its grid's
// queue (slots with the same grid share one), until every queue is empty.
EdgeBlocks fill_template(const Probe& probe, Template t, const LaneQueue& make_queue) {
  t.values = snap_anchors(probe, t.values, t.anchors);
  const PackedTensor q = probe.quantize_block(t.values);
  std::map<std::vector<uint32_t>, std::vector<Lane>> queues;
  std::vector<std::vector<uint32_t>> slot_grid(t.slots.size());
  for (size_t s = 0; s < t.slots.size(); ++s) {
    const auto [pos, anchor] = t.slots[s];
    const float bound = std::fabs(t.values[anchor]);
    std::vector<float> grid;
    for (uint8_t code = 0; code < 8; ++code) {
      const float v = std::fabs(probe.decode_as(q, pos, code));
      if (std::isfinite(v) && v <= bound) grid.push_back(v);
    }
    std::sort(grid.begin(), grid.end());
    grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
    std::vector<uint32_t> key{std::bit_cast<uint32_t>(bound)};
    for (float v : grid) key.push_back(std::bit_cast<uint32_t>(v));
    slot_grid[s] = key;
    if (!queues.count(key)) queues[key] = make_queue(grid, bound);
  }
  std::map<std::vector<uint32_t>, size_t> next;
  EdgeBlocks out;
  for (;;) {
    bool placed = false;
    Block b = t.values;
    std::vector<uint8_t> r(b.size(), 0);
    for (size_t s = 0; s < t.slots.size(); ++s) {
      const std::vector<Lane>& queue = queues[slot_grid[s]];
      size_t& n = next[slot_grid[s]];
      if (n < queue.size()) {
        b[t.slots[s].first] = queue[n].x;
        r[t.slots[s].first] = queue[n++].r;
        placed = true;
      }
    }
    if (!placed) break;
    out.blocks.push_back(std::move(b));
    out.rbits.push_back(std::move(r));
  }
  return out;
}

// The codes family's lanes: every representable value (and at level 2 one
// input ulp either side), every midpoint and one ulp either side, both signs.
LaneQueue codes_lanes(const InputGrid& g, int level) {
  return [g, level](const std::vector<float>& grid, float bound) {
    std::vector<Lane> lanes;
    for (size_t i = 0; i < grid.size(); ++i) {
      both_signs(lanes, grid[i], bound);
      if (level >= 2 && grid[i] > 0.0f) {
        both_signs(lanes, g.next_down(grid[i]), bound);
        both_signs(lanes, g.next_up(grid[i]), bound);
      }
      if (i + 1 < grid.size()) {
        const float mid = g.round((static_cast<double>(grid[i]) + grid[i + 1]) / 2.0);
        both_signs(lanes, mid, bound);
        both_signs(lanes, g.next_down(mid), bound);
        both_signs(lanes, g.next_up(mid), bound);
      }
    }
    return lanes;
  };
}

// Context shared by the edge families of one recipe and one set of options.
struct EdgeSetup {
  const Recipe& recipe;
  QuantOptions options;
  Probe probe;
  std::vector<ScaleStep> steps;
  EdgeSetup(const Recipe& r, QuantOptions o)
      : recipe(r), options(o), probe(r, o, InputGrid{o.input_dtype}), steps(find_scale_steps(probe)) {}
  const InputGrid& grid() const { return probe.grid(); }
};

CaseSpec codes_case(const EdgeSetup& e, int level) {
  const std::vector<ScaleCode> codes = scale_codes(e.steps, e.grid());
  const size_t n = level == 1 ? 5 : level == 2 ? 17 : codes.size();
  std::vector<Block> blocks;
  size_t variant = 0, used = 0;
  for (size_t i : spread(codes.size(), n)) {
    const Template t = make_template(e.recipe, codes[i].top_amax, variant++, e.grid());
    if (is_nan_scale(e.probe, e.probe.quantize_block(t.values))) continue;
    ++used;
    for (Block& b : fill_template(e.probe, t, codes_lanes(e.grid(), level)).blocks) blocks.push_back(std::move(b));
  }
  return edge_case(e.recipe, e.options, "codes", "codes",
                   fmt::format("every element code: inputs on each representable value, on each midpoint and one "
                               "input ulp either side of it{}, both signs, under {} scale codes from the smallest "
                               "to the largest",
                               level >= 2 ? " (and of each value)" : "", used),
                   std::move(blocks));
}

// ---- scale_steps: amax at, just below and just above every scale-code step ------------------

Block amax_block(const Recipe& r, float amax, int pos, int shift, const InputGrid& g) {
  const int block = block_size(r.format);
  Block b(block);
  for (int j = 0; j < block; ++j) b[j] = g.round(amax * frac(j + shift + 1));
  b[pos] = amax;
  return b;
}

CaseSpec scale_steps_case(const EdgeSetup& e, const std::string& name, const std::string& note) {
  const int block = block_size(e.recipe.format);
  std::vector<Block> blocks;
  for (size_t i = 0; i < e.steps.size(); ++i) {
    const float t = e.steps[i].amax;
    const int pos = static_cast<int>(i % block);
    const float sign = i % 2 ? -1.0f : 1.0f;
    for (float a : {e.grid().next_down(t), t, e.grid().next_up(t)})
      if (a > 0.0f && std::isfinite(a)) blocks.push_back(amax_block(e.recipe, sign * a, pos, static_cast<int>(i), e.grid()));
  }
  return edge_case(e.recipe, e.options, name, "scale_steps",
                   fmt::format("scale selection: block amax at, one input ulp below and one above each of the {} "
                               "steps of the scale code (searched over the input grid with the reference), the "
                               "amax lane moving through every position, the other lanes fractions of the amax "
                               "(element saturation just below a step){}",
                               e.steps.size(), note),
                   std::move(blocks));
}

// ---- hif4_bits: L2 and L3 micro-exponent thresholds ----------------------------------------

// Transitions of the whole scale word as one lane grows from the smallest
// positive input to `top`.
std::vector<float> word_transitions(const Probe& probe, Block b, int lane, float top) {
  const InputGrid& g = probe.grid();
  auto word_at = [&](uint32_t ord) {
    b[lane] = g.from_ordinal(ord);
    return probe.word(probe.quantize_block(b));
  };
  std::vector<float> found;
  uint32_t cur = 1;
  const uint32_t end = g.ordinal(top);
  const uint32_t word_end = word_at(end);
  uint32_t word_cur = word_at(cur);
  while (word_cur != word_end && cur < end && found.size() < 8) {
    uint32_t lo = cur, hi = end;
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      (word_at(mid) == word_cur ? lo : hi) = mid;
    }
    found.push_back(g.from_ordinal(hi));
    cur = hi;
    word_cur = word_at(hi);
  }
  return found;
}

CaseSpec hif4_bits_case(const EdgeSetup& e, int level) {
  std::vector<ScaleCode> codes;  // finite scale codes only
  for (const ScaleCode& sc : scale_codes(e.steps, e.grid())) {
    Block b(reference::kHif4Block, 0.0f);
    b[0] = sc.top_amax;
    if (!is_nan_scale(e.probe, e.probe.quantize_block(b))) codes.push_back(sc);
  }
  // (scale code index, groups): level 1 probes all 16 groups at a middle scale
  // and the outer groups at two more.
  std::vector<std::pair<size_t, std::vector<int>>> plan;
  std::vector<int> all(16);
  for (int k = 0; k < 16; ++k) all[k] = k;
  if (codes.empty()) {
    // no finite scale: nothing to probe
  } else if (level == 1) {
    plan = {{codes.size() / 2, all}, {codes.size() / 4, {0, 7, 8, 15}}, {3 * codes.size() / 4, {1, 14}}};
  } else {
    for (size_t i : spread(codes.size(), level == 2 ? 8 : 32)) plan.push_back({i, all});
  }
  const InputGrid& g = e.grid();
  std::vector<Block> blocks;
  int transitions = 0;
  for (const auto& [ci, groups] : plan) {
    const float a = codes[ci].top_amax;
    for (int k : groups) {
      Block base(reference::kHif4Block, 0.0f);
      const int anchor = k < 8 ? 63 : 0;  // in another L2 group than k
      base[anchor] = a;
      base = snap_anchors(e.probe, base, {anchor});
      if (is_nan_scale(e.probe, e.probe.quantize_block(base))) continue;
      const float top = std::fabs(base[anchor]);
      const int lane = 4 * k + k % 4;
      const int sibling = 4 * (k ^ 1) + (k ^ 1) % 4;
      for (int with_sibling = 0; with_sibling < 2; ++with_sibling) {
        // Without the sibling 4-group, the lane drives L3 bit k and then L2 bit
        // k/2; with the sibling at the top, L2 is set and the lane drives L3 alone.
        Block t = base;
        if (with_sibling) t[sibling] = top;
        for (float th : word_transitions(e.probe, t, lane, top)) {
          ++transitions;
          for (float v : {g.next_down(th), th, g.next_up(th)}) {
            if (!(v > 0.0f) || v > top) continue;
            Block b = t;
            b[lane] = v;
            for (int i = 0; i < 4; ++i)
              if (4 * k + i != lane) b[4 * k + i] = g.round(v * frac(4 * k + i + 1));
            blocks.push_back(std::move(b));
          }
        }
      }
    }
  }
  return edge_case(e.recipe, e.options, "hif4_bits", "hif4_bits",
                   fmt::format("HiF4 L2/L3 micro-exponents (docs/spec/hif4.md §3): a 4-group maximum at, one "
                               "ulp below and one above each of {} searched thresholds where the scale word "
                               "changes, with and without the sibling 4-group setting the L2 bit",
                               transitions),
                   std::move(blocks));
}

// ---- special: zeros, NaN/Inf at each position, subnormals, underflow, saturation -------------

float bits_to_input(const InputGrid& g, uint32_t word) {
  return std::bit_cast<float>(g.dtype == InputDType::bf16 ? word << 16 : word);
}

CaseSpec special_case(const EdgeSetup& e) {
  const Recipe& r = e.recipe;
  const InputGrid& g = e.grid();
  const int block = block_size(r.format);
  const bool bf16 = g.dtype == InputDType::bf16;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float max = g.from_ordinal(g.max_ordinal());
  Block bg(block);
  for (int j = 0; j < block; ++j) bg[j] = g.round(frac(j));
  std::vector<Block> blocks;
  auto all = [&](float v) { blocks.push_back(Block(block, v)); };
  // Zeros.
  all(0.0f);
  all(-0.0f);
  {
    Block b(block);
    for (int j = 0; j < block; ++j) b[j] = j % 2 ? -0.0f : 0.0f;
    blocks.push_back(b);
  }
  // NaN, +Inf and -Inf at each position.
  for (float s : {nan, inf, -inf})
    for (int p = 0; p < block; ++p) {
      Block b = bg;
      b[p] = s;
      blocks.push_back(b);
    }
  // Other non-finite mixes and NaN encodings.
  all(nan);
  all(inf);
  all(-inf);
  {
    Block b = bg;
    b[0] = bits_to_input(g, bf16 ? 0xFFC0u : 0xFFC00000u);  // -NaN
    b[1] = bits_to_input(g, bf16 ? 0x7FA1u : 0x7FA00001u);  // NaN with a payload (signalling pattern)
    blocks.push_back(b);
    b = bg;
    b[0] = nan;
    b[block - 1] = inf;
    blocks.push_back(b);
    b = bg;
    b[0] = inf;
    b[block / 2] = -inf;
    blocks.push_back(b);
  }
  // Subnormal inputs: all lanes subnormal; the largest subnormal; subnormals
  // beside a normal maximum.
  {
    const uint32_t sub_max = bf16 ? 0x007Fu : 0x007FFFFFu;
    Block b(block), c(block), d(block);
    for (int j = 0; j < block; ++j) {
      const uint32_t w = 1 + static_cast<uint32_t>((static_cast<uint64_t>(j) * 2654435761u) % sub_max);
      b[j] = (j % 2 ? -1.0f : 1.0f) * bits_to_input(g, w);
      c[j] = (j % 3 ? 1.0f : -1.0f) * bits_to_input(g, sub_max);
      d[j] = b[j];
    }
    d[block / 3] = 1.0f;
    blocks.push_back(b);
    blocks.push_back(c);
    blocks.push_back(d);
    all(bits_to_input(g, 1));
  }
  // Tiny blocks below the smallest scale step (scale underflow), down to the
  // smallest subnormal.
  if (!e.steps.empty()) {
    int i = 0;
    for (double a = e.steps.front().amax; a > 0.0; a /= 16.0) {
      const float v = g.round(a);
      if (v <= 0.0f) break;
      blocks.push_back(amax_block(r, v, i % block, i, g));
      ++i;
    }
    blocks.push_back(amax_block(r, bits_to_input(g, 1), 1, 0, g));
  }
  // Saturation: the largest finite input, alone and with all lanes at +-max,
  // and the first amax of the top scale code.
  blocks.push_back(amax_block(r, max, 0, 0, g));
  {
    Block b(block);
    for (int j = 0; j < block; ++j) b[j] = j % 2 ? -max : max;
    blocks.push_back(b);
  }
  if (!e.steps.empty()) {
    blocks.push_back(amax_block(r, e.steps.back().amax, block - 1, 3, g));
    blocks.push_back(amax_block(r, g.next_down(e.steps.back().amax), block - 1, 5, g));
  }
  return edge_case(r, e.options, "special", "special",
                   "special blocks: all +0, all -0, mixed zeros; NaN, +Inf and -Inf at each position; all NaN / "
                   "all Inf; -NaN and a NaN payload; subnormal inputs; tiny blocks underflowing the scale range "
                   "down to the smallest subnormal; the largest finite input (element and scale saturation)",
                   std::move(blocks));
}

// Signaling NaN inputs. A max-reduction in C that uses fmaxf disagrees on
// them: CUDA's fmaxf treats a signaling NaN like a quiet one and returns the
// other operand, glibc's returns NaN (IEEE 754-2008 maxNum), so a kernel's
// block amax (and NVFP4's tensor amax, taken from the data here) can differ
// from the recipe's on these blocks alone.
CaseSpec snan_case(const Recipe& r) {
  const InputDType dtype = natural_dtype(r);
  const InputGrid g{dtype};
  const bool bf16 = dtype == InputDType::bf16;
  const int block = block_size(r.format);
  const float snan = bits_to_input(g, bf16 ? 0x7F81u : 0x7F800001u);
  const float neg_snan = bits_to_input(g, bf16 ? 0xFF81u : 0xFF800001u);
  const float snan_payload = bits_to_input(g, bf16 ? 0x7FBFu : 0x7FBFFFFFu);
  Block bg(block);
  for (int j = 0; j < block; ++j) bg[j] = g.round(frac(j) * 3.0);
  std::vector<Block> blocks;
  for (int p = 0; p < block; ++p) {
    Block b = bg;
    b[p] = snan;
    blocks.push_back(b);
  }
  for (int p : {0, block - 1}) {
    Block b = bg;
    b[p] = neg_snan;
    blocks.push_back(b);
  }
  Block b = bg;
  b[1] = snan_payload;
  blocks.push_back(b);
  b = bg;
  b[2] = snan;
  b[block - 2] = std::numeric_limits<float>::quiet_NaN();
  blocks.push_back(b);
  blocks.push_back(Block(block, snan));
  blocks.push_back(bg);
  return edge_case(r, golden_options(r, dtype), "special_snan", "special",
                   fmt::format("signaling NaN inputs ({}): one in each position of a finite block, negative ones, "
                               "the largest payload, beside a quiet NaN, a block of them{}; CUDA's fmaxf drops a "
                               "signaling NaN from a max, glibc's does not",
                               bf16 ? "bf16 0x7F81, 0xFF81, 0x7FBF" : "0x7F800001, 0xFF800001, 0x7FBFFFFF",
                               r.format == Format::nvfp4 ? "; the per-tensor amax is taken from the data" : ""),
                   std::move(blocks));
}

// NVFP4: blocks share the per-tensor scale, so what a non-finite or extreme
// tensor amax does is a case of its own (global amax taken from the data).
std::vector<CaseSpec> nvfp4_global_cases(const Recipe& r) {
  const InputDType dtype = natural_dtype(r);
  const InputGrid g{dtype};
  struct Variant {
    const char* name;
    const char* what;
  };
  const Variant variants[] = {
      {"global_inf", "an Inf element makes the tensor amax Inf"},
      {"global_nan", "a NaN element in the tensor amax reduction"},
      {"global_zero", "an all-zero tensor (tensor amax 0)"},
      {"global_tiny", "a tensor of subnormals (tiny tensor amax)"},
      {"global_max", "the largest finite input as the tensor amax"},
  };
  std::vector<CaseSpec> cases;
  for (int v = 0; v < 5; ++v) {
    std::vector<Block> blocks(2, Block(16));
    for (int row = 0; row < 2; ++row)
      for (int j = 0; j < 16; ++j) {
        const double f = frac(row * 16 + j);
        blocks[row][j] = v == 2 ? 0.0f : v == 3 ? g.round(f * 0x1p-133) : g.round(f * 3.0);
      }
    if (v == 0) blocks[0][5] = std::numeric_limits<float>::infinity();
    if (v == 1) blocks[0][5] = std::numeric_limits<float>::quiet_NaN();
    if (v == 4) blocks[1][5] = g.from_ordinal(g.max_ordinal());
    cases.push_back(edge_case(r, golden_options(r, dtype), std::string("special_") + variants[v].name, "special",
                              fmt::format("NVFP4 per-tensor scale from the data: {}", variants[v].what),
                              std::move(blocks)));
  }
  return cases;
}

// ---- tails ------------------------------------------------------------------------------------

std::vector<CaseSpec> tail_cases(const Recipe& r, uint64_t seed) {
  const InputDType dtype = natural_dtype(r);
  const int block = block_size(r.format);
  std::vector<CaseSpec> cases;
  for (int t = 1; t < block; ++t) {
    CaseSpec c;
    c.id = fmt::format("{}/tail_{:02}", r.id, t);
    c.family = "tail";
    c.probes = fmt::format("ragged tail: axis length {} = {} + {}, the last block zero-padded (tail policy pad)",
                           block + t, block, t);
    c.recipe = &r;
    c.options = golden_options(r, dtype);
    c.options.tail = TailPolicy::pad;
    c.shape = {2, block + t};
    c.blocks_txt = true;
    const std::string id = c.id;
    c.make = [seed, id, dtype, block, t] {
      Rng rng(seed, id);
      const InputGrid g{dtype};
      std::vector<float> x(2 * (block + t));
      for (float& v : x) v = g.round(rng.normal() * 2.0);
      // Put the row maximum in the tail of row 1, so the tail block's scale
      // comes from a real element.
      x[2 * (block + t) - 1] = g.round(9.5);
      return x;
    };
    cases.push_back(std::move(c));
  }
  CaseSpec e;
  e.id = fmt::format("{}/tail_error", r.id);
  e.family = "tail_error";
  e.probes = fmt::format("tail policy error: axis length {} is not a multiple of {}; the input must be rejected "
                         "and no output written",
                         block + 1, block);
  e.recipe = &r;
  e.options = golden_options(r, dtype);
  e.options.tail = TailPolicy::error;
  e.shape = {2, block + 1};
  e.expect_error = true;
  e.make = [block] { return std::vector<float>(2 * (block + 1), 1.0f); };
  cases.push_back(std::move(e));
  return cases;
}

// ---- random tensors -----------------------------------------------------------------------------

enum class Dist { gaussian, student_t, llm };

// Values of a [rows, cols] tensor (C order). Gaussian and Student-t: each row
// (or column, when `per_col`) scaled by 2^U{-20..20}, 41 binades in all. LLM:
// per-token scale, a few outlier channels (x 2^6..2^10) and one massive token.
std::vector<float> random_values(Rng& rng, Dist dist, int64_t rows, int64_t cols, bool per_col, InputGrid g) {
  std::vector<float> x(rows * cols);
  std::vector<int> binade(per_col ? cols : rows);
  for (int& b : binade) b = static_cast<int>(rng.below(41)) - 20;
  std::vector<double> channel(cols, 1.0), token(rows, 1.0);
  if (dist == Dist::llm) {
    for (double& t : token) t = std::ldexp(1.0, static_cast<int>(rng.below(7)) - 3);
    const int64_t outliers = std::max<int64_t>(1, cols / 64);
    for (int64_t i = 0; i < outliers; ++i) channel[rng.below(cols)] = std::ldexp(1.0, 6 + static_cast<int>(rng.below(5)));
    token[rng.below(rows)] *= 0x1p12;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double v = 0.0;
      switch (dist) {
        case Dist::gaussian: v = std::ldexp(rng.normal(), binade[per_col ? c : r]); break;
        case Dist::student_t: v = std::ldexp(rng.student_t3(), binade[per_col ? c : r]); break;
        case Dist::llm: v = rng.normal() * token[r] * channel[c]; break;
      }
      x[r * cols + c] = g.round(v);
    }
  return x;
}

CaseSpec random_case(const Recipe& r, uint64_t seed, std::string name, std::string family, std::string probes,
                     Dist dist, std::vector<int64_t> shape, int axis, InputDType dtype,
                     std::vector<StoredScaleLayout> layouts = {}) {
  CaseSpec c;
  c.id = fmt::format("{}/{}", r.id, name);
  c.family = std::move(family);
  c.probes = std::move(probes);
  c.recipe = &r;
  c.options = golden_options(r, r.bf16_input_only ? InputDType::bf16 : dtype);
  c.options.axis = axis;
  c.shape = shape;
  c.layouts = std::move(layouts);
  const std::string id = c.id;
  const InputGrid g{c.options.input_dtype};
  c.make = [seed, id, dist, shape, axis, g] {
    Rng rng(seed, id);
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
    return random_values(rng, dist, rows, shape.back(), axis == 0, g);
  };
  return c;
}

std::vector<CaseSpec> random_cases(const Recipe& r, int level, uint64_t seed) {
  const int64_t b = block_size(r.format);
  const bool hif4 = r.format == Format::hif4;
  const StoredScaleLayout kernel_layout = hif4 ? StoredScaleLayout::hif4_cube : StoredScaleLayout::swizzled_128x4;
  const std::string layout_name(to_string(kernel_layout));
  std::vector<CaseSpec> cases;
  cases.push_back(random_case(r, seed, "random_gaussian_rows", "random",
                              "Gaussian, each row at its own binade in 2^-20..2^20, blocks along rows (axis 1)",
                              Dist::gaussian, {16, 4 * b}, 1, InputDType::f32));
  cases.push_back(random_case(r, seed, "random_student_t_cols", "random",
                              "heavy-tailed Student-t (3 dof), each column at its own binade in 2^-20..2^20, blocks "
                              "along columns (axis 0)",
                              Dist::student_t, {4 * b, 16}, 0, InputDType::f32));
  cases.push_back(random_case(r, seed, "random_llm_bf16", "random",
                              "LLM-like bf16 activations: per-token scales, outlier channels (x 2^6..2^10), one "
                              "massive token (x 2^12), blocks along channels",
                              Dist::llm, {32, 4 * b}, 1, InputDType::bf16));
  // Kernel-ready scale layouts: rows not a multiple of the tile, blocks per
  // row not a multiple of 4 (MX/NV), so the zero padding is exercised.
  const int64_t rows = hif4 ? 40 : 130;
  const int64_t blocks = hif4 ? 3 : 5;
  cases.push_back(random_case(r, seed, "layout_rows", "layout",
                              fmt::format("scale layouts linear and {} of an A operand [M={}, K={}] (blocks along "
                                          "rows; M and K/{} not multiples of the tile)",
                                          layout_name, rows, blocks * b, b),
                              Dist::gaussian, {rows, blocks * b}, 1, InputDType::bf16, {kernel_layout}));
  cases.push_back(random_case(r, seed, "layout_cols", "layout",
                              fmt::format("scale layouts linear and {} of a B operand stored [K={}, N={}] (blocks "
                                          "along columns, scale rows = N)",
                                          layout_name, 4 * b, hif4 ? 24 : 136),
                              Dist::gaussian, {4 * b, hif4 ? 24 : 136}, 0, InputDType::bf16, {kernel_layout}));
  if (level >= 2) {
    cases.push_back(random_case(r, seed, "random_gaussian_large", "random",
                                "larger Gaussian tensor, per-row binades in 2^-20..2^20",
                                Dist::gaussian, {256, 64 * b}, 1, InputDType::f32));
    cases.push_back(random_case(r, seed, "random_student_t_large_cols", "random",
                                "larger Student-t tensor, blocks along columns",
                                Dist::student_t, {32 * b, 128}, 0, InputDType::f32));
    cases.push_back(random_case(r, seed, "random_llm_large_bf16", "random",
                                "larger LLM-like bf16 activations with outlier channels",
                                Dist::llm, {256, 32 * b}, 1, InputDType::bf16));
    cases.push_back(random_case(r, seed, "layout_batched", "layout",
                                fmt::format("scale layouts linear and {} of a batch of 3 A operands", layout_name),
                                Dist::gaussian, {3, rows, blocks * b}, 2, InputDType::bf16, {kernel_layout}));
  }
  return cases;
}

// ---- stochastic: SR with its random bytes as an input (golden/README.md) ---------------------

bool has_sr(const Recipe& r) { return (r.allowed_roundings & rounding_bit(Rounding::stochastic)) != 0; }

// An edge case whose lanes carry their random bytes.
CaseSpec sr_edge_case(const EdgeSetup& e, std::string name, std::string probes, EdgeBlocks blocks) {
  QuantOptions o = e.options;
  o.rounding = Rounding::stochastic;
  CaseSpec c = edge_case(e.recipe, o, std::move(name), "stochastic", std::move(probes), std::move(blocks.blocks));
  auto flat = std::make_shared<std::vector<uint8_t>>();
  for (const std::vector<uint8_t>& r : blocks.rbits) flat->insert(flat->end(), r.begin(), r.end());
  c.make_rbits = [flat] { return *flat; };
  return c;
}

// Where SR's integer rule turns (away from zero iff floor(256·δ) + r >= 256,
// δ the position in the interval; docs/formats.md "Stochastic rounding"): in
// every interval of the grid, inputs at δ = 0 and one input ulp above (never
// up), 1/256, the midpoint and one ulp either side, 255/256 and one ulp below
// the upper neighbour, each with the bytes on both sides of the turn, and
// r = 0 and 255 at the midpoint; the top of the grid with r = 255 (no step
// past it). Both signs.
LaneQueue sr_lanes(const InputGrid& g) {
  return [g](const std::vector<float>& grid, float bound) {
    std::vector<Lane> lanes;
    const auto add = [&](float v, std::initializer_list<int> bytes) {
      for (int r : bytes) both_signs(lanes, v, bound, static_cast<uint8_t>(r));
    };
    for (size_t i = 0; i + 1 < grid.size(); ++i) {
      const double lo = grid[i], step = static_cast<double>(grid[i + 1]) - lo;
      const float mid = g.round(lo + step / 2);
      add(grid[i], {255});
      add(g.next_up(grid[i]), {255});
      add(g.round(lo + step / 256), {254, 255});
      add(mid, {0, 127, 128, 255});
      add(g.next_down(mid), {128, 129});
      add(g.next_up(mid), {127, 128});
      add(g.round(lo + step * 255 / 256), {0, 1});
      add(g.next_down(grid[i + 1]), {0, 1});
    }
    if (!grid.empty()) add(grid.back(), {255});
    return lanes;
  };
}

CaseSpec sr_grid_case(const EdgeSetup& e, int level) {
  const std::vector<ScaleCode> codes = scale_codes(e.steps, e.grid());
  std::vector<size_t> picks;
  if (level == 1 && codes.size() > 1) picks = {codes.size() / 2, codes.size() - 1};  // a middle and the top scale
  else picks = spread(codes.size(), 5);
  EdgeBlocks all;
  size_t variant = 0, used = 0;
  for (size_t i : picks) {
    const Template t = make_template(e.recipe, codes[i].top_amax, variant++, e.grid());
    if (is_nan_scale(e.probe, e.probe.quantize_block(t.values))) continue;
    ++used;
    EdgeBlocks b = fill_template(e.probe, t, sr_lanes(e.grid()));
    std::move(b.blocks.begin(), b.blocks.end(), std::back_inserter(all.blocks));
    std::move(b.rbits.begin(), b.rbits.end(), std::back_inserter(all.rbits));
  }
  return sr_edge_case(e, "sr_grid",
                      fmt::format("stochastic rounding in every interval of the element grid under {} scale "
                                  "codes: inputs on a grid value, one ulp above it, at 1/256, at the midpoint (a "
                                  "tie) and one ulp either side, at 255/256 and one ulp below the next value, each "
                                  "with the random bytes on both sides of floor(256*delta) + r = 256, r = 0 and "
                                  "r = 255; both signs",
                                  used),
                      std::move(all));
}

// NaN, Inf, zeros, saturation and underflow under SR, each block with every
// lane's byte 0 or 255 (the largest byte must not step past the top of the
// grid, the smallest must not round anything up).
CaseSpec sr_special_case(const EdgeSetup& e) {
  const Recipe& r = e.recipe;
  const InputGrid& g = e.grid();
  const int block = block_size(r.format);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float max = g.from_ordinal(g.max_ordinal());
  EdgeBlocks out;
  const auto add = [&](const Block& b, std::initializer_list<int> bytes) {
    for (int v : bytes) {
      out.blocks.push_back(b);
      out.rbits.emplace_back(block, static_cast<uint8_t>(v));
    }
  };
  Block bg(block);
  for (int j = 0; j < block; ++j) bg[j] = g.round(frac(j));
  add(bg, {0, 128, 255});
  add(Block(block, 0.0f), {255});
  add(Block(block, -0.0f), {255});
  for (float v : {nan, inf, -inf})
    for (int p : {1, block - 1}) {
      Block b = bg;
      b[p] = v;
      add(b, {0, 255});
    }
  add(Block(block, nan), {255});
  // Saturation: the largest finite input; every lane at +-max; blocks whose
  // amax lies one ulp below a scale step (elements beyond the top of the grid).
  add(amax_block(r, max, 0, 0, g), {0, 255});
  {
    Block b(block);
    for (int j = 0; j < block; ++j) b[j] = j % 2 ? -max : max;
    add(b, {255});
  }
  const std::vector<size_t> steps = spread(e.steps.size(), 4);
  for (size_t k = 0; k < steps.size(); ++k) {
    const float a = g.next_down(e.steps[steps[k]].amax);
    if (a > 0.0f) add(amax_block(r, a, static_cast<int>((5 * k) % block), static_cast<int>(k), g), {0, 255});
  }
  // Underflow: a block below the smallest scale step (elements under the
  // smallest element round up only with a large byte), and subnormal inputs.
  if (!e.steps.empty()) {
    const float a = g.round(static_cast<double>(e.steps.front().amax) / 16.0);
    if (a > 0.0f) add(amax_block(r, a, 2, 1, g), {0, 255});
  }
  add(amax_block(r, bits_to_input(g, 1), 1, 0, g), {255});
  return sr_edge_case(e, "sr_special",
                      "stochastic rounding of special blocks, every byte 0 or 255: NaN, +Inf and -Inf in a lane, "
                      "all NaN, all +0 and all -0, the largest finite input, amax one ulp below scale steps "
                      "(element saturation), a block below the smallest scale step, a subnormal block",
                      std::move(out));
}

// Random tensors under SR: given bytes on a ragged tail, and bytes from
// Philox under each stream (the key in the manifest regenerates them).
std::vector<CaseSpec> sr_random_cases(const Recipe& r, uint64_t seed) {
  const int64_t b = block_size(r.format);
  const auto make = [&](const char* name, std::string probes, Dist dist, std::vector<int64_t> shape, int axis) {
    CaseSpec c = random_case(r, seed, name, "stochastic", std::move(probes), dist, shape, axis, InputDType::f32);
    c.options.rounding = Rounding::stochastic;
    c.options.tail = TailPolicy::pad;
    return c;
  };
  const auto philox = [&](CaseSpec c, SrRng rng, RbitsMap map, uint64_t offset) {
    Rng key(seed, c.id + "/philox");
    c.options.stochastic.seed = key.next() >> 11;  // below 2^53: exact in every JSON reader
    c.options.stochastic.offset = offset;
    c.options.stochastic.rng = rng;
    c.options.stochastic.map = map;
    return c;
  };
  std::vector<CaseSpec> cases;
  const int64_t tail_len = b + b / 2 + 3;
  CaseSpec tail = make("sr_tail",
                       fmt::format("stochastic rounding with given random bytes, ragged tail: axis length {} = {} + "
                                   "{}, the last block zero-padded (padding rounds to +0 whatever its byte)",
                                   tail_len, b, tail_len - b),
                       Dist::gaussian, {2, tail_len}, 1);
  tail.make_rbits = [seed, id = tail.id, n = 2 * tail_len] {
    Rng rng(seed, id + "/rbits");
    std::vector<uint8_t> bytes(n);
    for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng.next() >> 56);
    return bytes;
  };
  cases.push_back(std::move(tail));
  cases.push_back(philox(make("sr_philox_te",
                              "stochastic rounding with Philox4x32-10 bytes, stream philox-te (one 32-bit word per 4 "
                              "elements, thread = block), rbits_map te, offset 3, blocks along rows with a tail",
                              Dist::gaussian, {4, 2 * b + 6}, 1),
                         SrRng::philox_te, RbitsMap::te, 3));
  cases.push_back(philox(make("sr_philox_te_ptx",
                              "stochastic rounding with Philox4x32-10 bytes, stream philox-te read with rbits_map ptx "
                              "(the PTX text's byte order of a cvt.rs word)",
                              Dist::gaussian, {2, 2 * b}, 1),
                         SrRng::philox_te, RbitsMap::ptx, 0));
  cases.push_back(philox(make("sr_philox_index",
                              "stochastic rounding with Philox4x32-10 bytes, stream philox-index (byte i of the "
                              "counter i/16), offset 5, heavy-tailed, blocks along columns (axis 0) with a tail",
                              Dist::student_t, {2 * b + 3, 6}, 0),
                         SrRng::philox_index, RbitsMap::te, 5));
  return cases;
}

// ---- level 3: every bf16 value through every position --------------------------------------------

std::vector<CaseSpec> exhaustive_cases(const Recipe& r) {
  const int block = block_size(r.format);
  std::vector<CaseSpec> cases;
  for (int p = 0; p < block; ++p) {
    CaseSpec c;
    c.id = fmt::format("{}/exhaustive_bf16_pos{:02}", r.id, p);
    c.family = "exhaustive";
    c.probes = fmt::format("every bf16 bit pattern (row i = pattern i) in lane {}, the other lanes a fixed "
                           "background of magnitudes up to 1",
                           p);
    c.recipe = &r;
    c.options = edge_options(r, InputDType::bf16);
    c.shape = {65536, block};
    c.make = [block, p] {
      const InputGrid g{InputDType::bf16};
      std::vector<float> x(int64_t{65536} * block);
      for (int64_t i = 0; i < 65536; ++i)
        for (int j = 0; j < block; ++j)
          x[i * block + j] = j == p ? std::bit_cast<float>(static_cast<uint32_t>(i) << 16) : g.round(frac(j));
      return x;
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

std::vector<float> gemm_operand_values(Rng& rng, int64_t rows, int64_t cols, bool per_col, InputGrid g) {
  return random_values(rng, Dist::gaussian, rows, cols, per_col, g);
}

std::vector<GemmCaseSpec> build_gemm_cases(const Recipe& r, int level, uint64_t seed) {
  const int64_t b = block_size(r.format);
  // Random scale codes: HiF4's scale is a three-level word whose L2/L3 fields
  // are tied to the codes, so only MXFP4/NVFP4 take random codes.
  const bool random_ok = r.format != Format::hif4;
  auto make = [&](std::string name, std::string probes, int64_t m, int64_t n, int64_t k, bool random_scales,
                  std::optional<float> alpha) {
    return GemmCaseSpec{fmt::format("{}/{}", r.id, name), std::move(probes), &r, m, n, k, random_scales && random_ok,
                        alpha, seed, std::nullopt, false};
  };
  std::vector<GemmCaseSpec> cases;
  cases.push_back(make("gemm_tail", "GEMM of quantized Gaussian operands, k with a padded tail block, no alpha", 5, 7,
                       3 * b + 5, false, std::nullopt));
  cases.push_back(make("gemm_scales",
                       random_ok ? "GEMM with random block scale codes over the format's range, NaN codes included, "
                                   "k with a tail, alpha 0.75"
                                 : "GEMM of quantized Gaussian operands, k with a tail, alpha 0.75",
                       4, 5, 2 * b + 3, true, 0.75f));
  // Every GEMM case also stores the operand scales in the format's kernel
  // layout; this one spans two row tiles of it (m = 130 > 128 for
  // swizzled_128x4, 130 = 8·16 + 2 for hif4_cube) with a block count per row
  // that is not a multiple of 4, so the layouts' padding is exercised.
  cases.push_back(make("gemm_layout",
                       fmt::format("GEMM of quantized Gaussian operands with scales also in the {} layout, A rows "
                                   "past one tile (m = 130), blocks per row not a multiple of 4",
                                   random_ok ? "swizzled_128x4" : "hif4_cube"),
                       130, 9, 5 * b + 3, false, std::nullopt));
  // D = alpha'·acc + beta·C + bias in CUTLASS's order: C and bias near the
  // size of the products (so every rounding shows), an Inf, a −0 and a NaN
  // among them.
  GemmCaseSpec epilogue = make("gemm_epilogue",
                               "GEMM epilogue D = fma(beta, C, fma(alpha', acc, bias)) (CUTLASS LinCombPerColBias), "
                               "alpha 0.75, beta -0.5, C and bias with Inf, NaN and -0, k with a tail",
                               6, 10, 2 * b + 3, false, 0.75f);
  epilogue.beta = -0.5f;
  epilogue.bias = true;
  cases.push_back(std::move(epilogue));
  if (level >= 2) {
    cases.push_back(make("gemm_large", "larger GEMM of quantized Gaussian operands, k with a tail, alpha 3", 24, 24,
                         16 * b + 7, false, 3.0f));
    if (random_ok)
      cases.push_back(make("gemm_large_scales",
                           "larger GEMM with random block scale codes, NaN codes included, k with a tail", 24, 24,
                           16 * b + 7, true, std::nullopt));
  }
  return cases;
}

std::vector<CaseSpec> build_cases(const Recipe& r, int level, uint64_t seed) {
  std::vector<CaseSpec> cases, sr;
  const InputDType dtype = natural_dtype(r);
  {
    const EdgeSetup e(r, edge_options(r, dtype));
    cases.push_back(codes_case(e, level));
    cases.push_back(scale_steps_case(
        e, "scale_steps",
        r.format == Format::nvfp4 ? "; per-tensor amax fixed at 2688 (S_enc = S_dec = 1)" : ""));
    if (r.format == Format::hif4) cases.push_back(hif4_bits_case(e, level));
    cases.push_back(special_case(e));
    if (has_sr(r)) {
      sr.push_back(sr_grid_case(e, level));
      sr.push_back(sr_special_case(e));
      for (CaseSpec& c : sr_random_cases(r, seed)) sr.push_back(std::move(c));
    }
  }
  cases.push_back(snan_case(r));
  if (r.format == Format::nvfp4 && reference::nvfp4_tensor_scale(r, 1000.0f).encode != 1.0f) {
    const EdgeSetup e(r, edge_options(r, dtype, 1000.0f));
    cases.push_back(scale_steps_case(e, "scale_steps_g1000", "; per-tensor amax fixed at 1000 (S_enc = 2.688)"));
  }
  if (r.format == Format::nvfp4)
    for (CaseSpec& c : nvfp4_global_cases(r)) cases.push_back(std::move(c));
  for (CaseSpec& c : tail_cases(r, seed)) cases.push_back(std::move(c));
  for (CaseSpec& c : random_cases(r, level, seed)) cases.push_back(std::move(c));
  for (CaseSpec& c : sr) cases.push_back(std::move(c));
  if (level >= 3)
    for (CaseSpec& c : exhaustive_cases(r)) cases.push_back(std::move(c));
  // An edge family with nothing to probe for this recipe (no finite scale to
  // place values under) has no blocks: leave it out.
  std::erase_if(cases, [](const CaseSpec& c) { return c.shape[0] == 0; });
  return cases;
}

}  // namespace fp4emu::golden
