// The one dynamic-dispatch point of the fast path: per-target entry points
// over runs of blocks, compiled for every Highway target attainable on the
// architecture (scalar fallback included, so that the tests can prove each
// one against the reference), and chosen at run time by HWY_DYNAMIC_DISPATCH.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#undef HWY_TARGET_INCLUDE
// This file, by its path from the repository root (a private include
// directory of the library); foreach_target.h includes it once per target.
#define HWY_TARGET_INCLUDE "src/quant/simd/kernels.cpp"
#include "hwy/foreach_target.h"      // IWYU pragma: keep

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "fp4emu/quant/reference.hpp"
#include "src/quant/simd.hpp"
#include "hif4-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "mxfp4-inl.h"
#include "nvfp4-inl.h"
#include "pack-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Calls f(std::integral_constant<Rounding, R>) for the element rounding r.
// rtp never reaches a kernel: no recipe allows it for elements.
template <class F>
HWY_INLINE void WithRounding(Rounding r, F&& f) {
  switch (r) {
    case Rounding::rne: return f(std::integral_constant<Rounding, Rounding::rne>());
    case Rounding::rha: return f(std::integral_constant<Rounding, Rounding::rha>());
    case Rounding::rtz: return f(std::integral_constant<Rounding, Rounding::rtz>());
    case Rounding::ties_to_zero: return f(std::integral_constant<Rounding, Rounding::ties_to_zero>());
    case Rounding::stochastic: return f(std::integral_constant<Rounding, Rounding::stochastic>());
    default: break;  // rtp reaches no kernel (driver.cpp kernel_rounds)
  }
}

// A group lambda inlined into its run's loop, where GCC left it a call per
// group: the call, and the constants it rebuilt per call, cost nvfp4.te
// fake-quant 1 AVX2 instruction per value once NvGroup packed its codes
// itself. (MXFP4 quantize's block is better as a call: inlined, mxfp4.ocp
// took 7.8 instructions per value against 5.8; FP4EMU_NOINLINE_LAMBDA.)
#ifndef FP4EMU_INLINE_LAMBDA
#define FP4EMU_INLINE_LAMBDA __attribute__((always_inline))
#define FP4EMU_NOINLINE_LAMBDA __attribute__((noinline))
#endif

// The random bytes of the values from position `at` of the run (null unless stochastic).
HWY_INLINE const uint8_t* RbitsAt(const KernelArgs& k, int64_t at) { return k.rbits ? k.rbits + at : nullptr; }

// The HiF4 recipe's per-block rules (hif4-inl.h) from its parameters.
Hif4Rules Hif4RulesOf(const Recipe& r) {
  Hif4Rules rules;
  rules.range = r.hif4.scale_range;
  rules.non_finite = r.hif4.non_finite;
  rules.sign_less_than_zero = r.hif4.zero_sign == ZeroSign::less_than_zero;
  rules.recipe = &r;
  return rules;
}

// Calls f(std::integral_constant<Hif4Elements, K>) for a HiF4 recipe.
template <class F>
HWY_INLINE void WithHif4Elements(const KernelArgs& k, F&& f) {
  switch (k.family) {
    case KernelFamily::hif4_amct: return f(std::integral_constant<Hif4Elements, Hif4Elements::bf16_ratio>());
    case KernelFamily::hif4_f64: return f(std::integral_constant<Hif4Elements, Hif4Elements::exact>());
    case KernelFamily::hif4_a6: return f(std::integral_constant<Hif4Elements, Hif4Elements::a6>());
    default:
      if (k.recipe->hif4.arithmetic == Hif4Arithmetic::pow2_v12)
        return f(std::integral_constant<Hif4Elements, Hif4Elements::pow2>());
      return f(std::integral_constant<Hif4Elements, Hif4Elements::fp32>());
  }
}

// ---- Runs of blocks: whole blocks in place, the tail through a zero-padded copy.
// The block and group functions also take the run position of their first value.

template <int kBlock, class BlockFn>
HWY_INLINE void FakeQuantRun(const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n, BlockFn&& block) {
  static_assert(kRbitsPad % kBlock == 0);
  const int64_t whole = n / kBlock;
  for (int64_t b = 0; b < whole; ++b) block(x + b * kBlock, y + b * kBlock, b * kBlock);
  const int64_t tail = n - whole * kBlock;
  if (tail == 0) return;
  alignas(64) float in[kBlock] = {};
  alignas(64) float out[kBlock];
  std::copy_n(x + whole * kBlock, tail, in);
  block(in, out, whole * kBlock);
  std::copy_n(out, tail, y + whole * kBlock);
}

// Runs of kGroup values (kGroup / kBlock blocks; one block, or several small
// ones handled together). group(x, codes, scales) writes the group's codes
// and one scale per block, stored as a little-endian integer of kScaleBytes
// bytes. Nibbles are packed per group where the order is position-local
// (low_first, high_first), per block for split_half; only the blocks that
// hold values are written.
// kGroupPacks: group() writes its blocks' packed bytes itself, in `order`,
// straight into the row (codes + the group's offset), or for the last group,
// when it runs past the row's values, into a buffer whose used blocks are
// copied. The whole groups run in a loop of their own, their scale bytes
// stored by an unrolled copy: per-group tail logic and a run-time byte count
// cost MXFP4 (one block per group) 0.3 AVX2 instructions per value. group()
// has two call sites, so the callers that want it inlined say so
// (FP4EMU_INLINE_LAMBDA).
template <int kBlock, int kGroup, int kScaleBytes, bool kGroupPacks = false, class GroupFn>
HWY_INLINE void QuantizeRun(NibbleOrder order, const float* HWY_RESTRICT x, int64_t n, uint8_t* HWY_RESTRICT codes,
                            uint8_t* HWY_RESTRICT scales, GroupFn&& group) {
  static_assert(kRbitsPad % kGroup == 0);
  constexpr int kBlocks = kGroup / kBlock;
  alignas(64) uint8_t group_codes[kGroup];
  uint32_t group_scales[kBlocks] = {};
  auto store_scales = [&](int64_t first, int count) {
    for (int b = 0; b < count; ++b) {
      uint8_t* to = scales + (first + b) * kScaleBytes;
      if constexpr (kScaleBytes == 4 && std::endian::native == std::endian::little) {
        std::memcpy(to, &group_scales[b], 4);  // one store; GCC left HiF4's word 4 byte stores and shifts
      } else {
        for (int i = 0; i < kScaleBytes; ++i) to[i] = static_cast<uint8_t>(group_scales[b] >> (8 * i));
      }
    }
  };
  // The group's codes from group_codes into the row, `used` blocks of them.
  auto pack = [&](int64_t first, int used) {
    if (used == kBlocks && order != NibbleOrder::split_half) {
      PackNibbles<kGroup>(order, group_codes, codes + first * (kBlock / 2));
    } else {
      for (int b = 0; b < used; ++b)
        PackNibbles<kBlock>(order, group_codes + b * kBlock, codes + (first + b) * (kBlock / 2));
    }
  };
  const int64_t whole = n / kGroup;
  for (int64_t g = 0; g < whole; ++g) {
    const int64_t first = g * kBlocks;
    if constexpr (kGroupPacks) {
      group(x + g * kGroup, codes + first * (kBlock / 2), group_scales, g * kGroup);
    } else {
      group(x + g * kGroup, group_codes, group_scales, g * kGroup);
      pack(first, kBlocks);
    }
    store_scales(first, kBlocks);
  }
  const int64_t valid = n - whole * kGroup;
  if (valid == 0) return;
  alignas(64) float padded[kGroup];
  std::fill(std::copy_n(x + whole * kGroup, valid, padded), padded + kGroup, 0.0f);
  const int64_t first = whole * kBlocks;
  const int used = static_cast<int>((valid + kBlock - 1) / kBlock);
  group(padded, group_codes, group_scales, whole * kGroup);
  if constexpr (kGroupPacks) std::copy_n(group_codes, used * (kBlock / 2), codes + first * (kBlock / 2));
  else pack(first, used);
  store_scales(first, used);
}

// block(codes, scale_bytes_ptr, y) decodes one whole block; codes are
// unpacked per group of kGroup values where the nibble order allows.
template <int kBlock, int kGroup, class BlockFn>
HWY_INLINE void DequantizeRun(NibbleOrder order, int scale_bytes, const uint8_t* HWY_RESTRICT codes,
                              const uint8_t* HWY_RESTRICT scales, int64_t n, float* HWY_RESTRICT y,
                              BlockFn&& block) {
  constexpr int kBlocks = kGroup / kBlock;
  alignas(64) uint8_t group_codes[kGroup];
  alignas(64) float out[kBlock];
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  for (int64_t first = 0; first < blocks; first += kBlocks) {
    const int used = static_cast<int>(std::min<int64_t>(kBlocks, blocks - first));
    if (used == kBlocks && order != NibbleOrder::split_half) {
      UnpackNibbles<kGroup>(order, codes + first * (kBlock / 2), group_codes);
    } else {
      for (int b = 0; b < used; ++b)
        UnpackNibbles<kBlock>(order, codes + (first + b) * (kBlock / 2), group_codes + b * kBlock);
    }
    for (int b = 0; b < used; ++b) {
      const int64_t start = (first + b) * kBlock;
      const int64_t valid = std::min<int64_t>(kBlock, n - start);
      const uint8_t* block_scale = scales + (first + b) * scale_bytes;
      if (valid == kBlock) {
        block(group_codes + b * kBlock, block_scale, y + start);
      } else {
        block(group_codes + b * kBlock, block_scale, out);
        std::copy_n(out, valid, y + start);
      }
    }
  }
}

NvTensorConstants NvConstants(const KernelArgs& k) {
  const NvParams& p = k.recipe->nv;
  NvTensorConstants t;
  t.s_enc = k.nv_encode;
  t.s_dec = k.nv_decode;
  t.g = k.nv_global_amax;
  t.m = k.nv_encode * library::kRn16;            // nvfp4.cpp quantize_te, quantize_cutlass_epi
  t.six_m = 6.0f * p.tensor_scale_e4m3_max;     // exact
  t.amax_nan = p.amax_nan;
  t.cuda = p.device == NvDevice::cuda;
  t.bf16_quotient = p.ct_bf16_quotient;
  t.select_mse = p.select_metric == NvSelectMetric::mse;
  t.factor = k.nv_factor;
  t.ggml = k.ggml_argmin;
  t.ggml_literal_bits = static_cast<int32_t>(k.ggml_literal_bits);
  t.two_step = !reference::nvfp4_decode_is_block_factor(*k.recipe);
  t.positive_zero = k.nv_positive_zero;
  t.order = k.nibble_order;
  return t;
}

// The one table of NVFP4 scale policies: calls f(policy) for the recipe's
// rule (te_4over6 and ggml have kernel families of their own).
template <class F>
HWY_INLINE void WithNvPolicy(NvScaleRule rule, F&& f) {
  switch (rule) {
    case NvScaleRule::te: return f(NvTe());
    case NvScaleRule::cutlass_epi: return f(NvCutlassEpi());
    case NvScaleRule::cudnn: return f(NvCudnn());
    case NvScaleRule::torchao:
    case NvScaleRule::torchao_1l: return f(NvTorchao());  // S_dec = 1 for 1l (nvfp4_tensor_scale)
    case NvScaleRule::modelopt: return f(NvModelopt());
    case NvScaleRule::ct: return f(NvCt());
    case NvScaleRule::modelopt_fq:
    case NvScaleRule::te_4over6:
    case NvScaleRule::ggml: break;
  }
}

// NVFP4 runs: whole groups of kNvGroup blocks; the zero padding past n adds
// whole zero blocks, whose results are dropped. group(x, amax, y, codes,
// scales) with amax the blocks' given amaxes (16x16 tiles) or null.
template <class GroupFn>
HWY_INLINE void NvFakeQuantRun(const KernelArgs& k, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n,
                               GroupFn&& group) {
  constexpr int kValues = kNvGroup * kNvBlock;
  const int64_t blocks = (n + kNvBlock - 1) / kNvBlock;
  int64_t g = 0;  // FakeQuantRun visits the groups in order
  FakeQuantRun<kValues>(x, y, n, [&](const float* in, float* out, int64_t at) {
    float tail_amax[kNvGroup] = {};
    const float* amax = k.nv_block_amax ? k.nv_block_amax + g * kNvGroup : nullptr;
    if (amax && (g + 1) * kNvGroup > blocks) {
      std::copy(amax, amax + (blocks - g * kNvGroup), tail_amax);
      amax = tail_amax;
    }
    ++g;
    group(in, amax, out, nullptr, nullptr, RbitsAt(k, at));
  });
}

// kGroupPacks: group() writes packed bytes in k.nibble_order (QuantizeRun).
template <bool kGroupPacks = false, class GroupFn>
HWY_INLINE void NvQuantizeRun(const KernelArgs& k, const float* HWY_RESTRICT x, int64_t n, uint8_t* HWY_RESTRICT codes,
                              uint8_t* HWY_RESTRICT scales, GroupFn&& group) {
  const int64_t blocks = (n + kNvBlock - 1) / kNvBlock;
  int64_t g = 0;  // QuantizeRun visits the groups in order
  QuantizeRun<kNvBlock, kNvGroup * kNvBlock, 1, kGroupPacks>(
      k.nibble_order, x, n, codes, scales,
      [&](const float* in, uint8_t* c, uint32_t* scale, int64_t at) FP4EMU_INLINE_LAMBDA {
        float tail_amax[kNvGroup] = {};
        const float* amax = k.nv_block_amax ? k.nv_block_amax + g * kNvGroup : nullptr;
        if (amax && (g + 1) * kNvGroup > blocks) {
          std::copy(amax, amax + (blocks - g * kNvGroup), tail_amax);
          amax = tail_amax;
        }
        ++g;
        group(in, amax, nullptr, c, scale, RbitsAt(k, at));
      });
}

// Element roundings of the NVFP4 kernels: the CUDA conversion's rne and rtz
// (nvfp4_recipes.cpp kConvertRoundings; ggml's argmin takes none), and cvt.rs
// (TE's stochastic rounding, the te rule only).
template <class F>
HWY_INLINE void WithNvRounding(Rounding r, F&& f) {
  if (r == Rounding::rtz) return f(std::integral_constant<Rounding, Rounding::rtz>());
  if (r == Rounding::stochastic) return f(std::integral_constant<Rounding, Rounding::stochastic>());
  return f(std::integral_constant<Rounding, Rounding::rne>());
}

// One group kernel's run, a function of its own. kGroupPacks: the group
// writes packed bytes (NvGroup), else one code per byte.
template <bool kGroupPacks, class GroupFn>
HWY_NOINLINE void NvRun(const KernelArgs& k, const float* HWY_RESTRICT x, int64_t n, float* HWY_RESTRICT y,
                        uint8_t* HWY_RESTRICT codes, uint8_t* HWY_RESTRICT scales, const GroupFn& group) {
  if (y)
    NvFakeQuantRun(k, x, y, n, group);
  else
    NvQuantizeRun<kGroupPacks>(k, x, n, codes, scales, group);
}

// te_4over6 (no tiles, no random bits). Its fake quant runs its own loop
// over groups, the group inlined and its constants hoisted out of it: 11.89
// -> 11.02 AVX2 instructions per value. (NvFakeQuantRun calls the group;
// inlined there, the other kernels count as many or more: modelopt_fq 6.75
// -> 7.12.)
template <Rounding R>
HWY_NOINLINE void Nv4over6Run(const KernelArgs& k, const NvTensorConstants& constants, const float* HWY_RESTRICT x,
                              int64_t n, float* HWY_RESTRICT y, uint8_t* HWY_RESTRICT codes,
                              uint8_t* HWY_RESTRICT scales) {
  const NvTensorConstants t = constants;  // a copy, which the stores of the output cannot change
  if (y) {
    FakeQuantRun<kNvGroup * kNvBlock>(x, y, n, [&t](const float* in, float* out, int64_t) FP4EMU_INLINE_LAMBDA {
      Nv4over6Group<R, true>(t, in, out, nullptr, nullptr);
    });
  } else {
    NvQuantizeRun(k, x, n, codes, scales,
                  [&t](const float* in, const float*, float*, uint8_t* c, uint32_t* s, const uint8_t*)
                      FP4EMU_INLINE_LAMBDA { Nv4over6Group<R, false>(t, in, nullptr, c, s); });
  }
}

AbsMaxStats AbsMaxStatsOf(const float* HWY_RESTRICT x, int64_t n);

// nvfp4.ggml (NvGgmlGroupBlocks): each group's scales are computed while the
// group before runs its blocks (NvGgmlScales), one group ahead within the
// whole groups, the input prefetched as far ahead; the first group and a
// padded tail compute their own (a tail's zero padding adds nothing to seen).
// On AVX-512, one thread, quantize went 1.9 -> 2.5 G values/s with the
// scales ahead, and 2.45 -> 2.6 at 16M values with the prefetch.
HWY_NOINLINE void NvGgmlRun(const NvTensorConstants& constants, const float* HWY_RESTRICT x, int64_t n,
                            float* HWY_RESTRICT y, uint8_t* HWY_RESTRICT codes, uint8_t* HWY_RESTRICT scales,
                            int32_t* HWY_RESTRICT seen) {
  const NvTensorConstants t = constants;  // a copy, which the stores of the output cannot change
  constexpr int kValues = kNvGroup * kNvBlock;
  constexpr int kPrefetchAhead = 16 * kValues;
  const int64_t whole_values = n / kValues * kValues;
  const GgmlArgminConstants<NvGgmlTag> argmin{NvGgmlTag()};
  NvGgmlScales ahead[2];  // by the parity of the group
  // The runs visit their groups in order from position 0, so every whole
  // group but the first finds its scales made by the group before.
  auto scales_of = [&](const float* in, int64_t at) FP4EMU_INLINE_LAMBDA -> const NvGgmlScales& {
    NvGgmlScales& now = ahead[(at / kValues) & 1];
    if (at == 0 || at >= whole_values) NvGgmlGroupScales(t, in, seen, now);
    if (at + kValues < whole_values) {
      if (at + kPrefetchAhead + kValues <= whole_values)  // no pointer past the run
        for (int i = 0; i < kValues; i += 64 / sizeof(float)) hwy::Prefetch(in + kPrefetchAhead + i);
      NvGgmlGroupScales(t, in + kValues, seen, ahead[(at / kValues + 1) & 1]);
    }
    return now;
  };
  if (y) {
    FakeQuantRun<kValues>(x, y, n, [&](const float* in, float* out, int64_t at) FP4EMU_INLINE_LAMBDA {
      NvGgmlGroupBlocks<true>(t, argmin, t.order, in, out, nullptr, nullptr, scales_of(in, at));
    });
  } else {
    QuantizeRun<kNvBlock, kValues, 1, true>(
        t.order, x, n, codes, scales, [&](const float* in, uint8_t* c, uint32_t* s, int64_t at) FP4EMU_INLINE_LAMBDA {
          NvGgmlGroupBlocks<false>(t, argmin, t.order, in, nullptr, c, s, scales_of(in, at));
        });
  }
}

void NvValues(const KernelArgs& k, const float* HWY_RESTRICT x, int64_t n, float* HWY_RESTRICT y,
              uint8_t* HWY_RESTRICT codes, uint8_t* HWY_RESTRICT scales) {
  const NvTensorConstants t = NvConstants(k);
  auto run = [&](auto&& group) { NvRun<false>(k, x, n, y, codes, scales, group); };
  auto run_packing = [&](auto&& group) { NvRun<true>(k, x, n, y, codes, scales, group); };
  if (k.family == KernelFamily::nvfp4_ggml) {  // packs its codes itself
    alignas(16) int32_t seen[kNvGroup] = {};  // the largest block max bits so far, NaN included
    NvGgmlRun(t, x, n, y, codes, scales, y == nullptr && k.run_amax ? seen : nullptr);
    if (y == nullptr && k.run_amax) {  // AbsMaxStatsOf's facts; a run with a NaN (rare) takes them from AbsMaxStatsOf itself
      const int32_t top = *std::max_element(seen, seen + kNvGroup);
      *k.run_amax = HWY_LIKELY(top <= kInfBits) ? AbsMaxStats{std::bit_cast<float>(top), false, n == 0}
                                                : AbsMaxStatsOf(x, n);
    }
    return;
  }
  WithNvRounding(k.rounding, [&](auto rounding) {
    constexpr Rounding R = decltype(rounding)::value;
    if constexpr (R == Rounding::stochastic) {  // the te rule (driver.cpp kernel_rounds)
      run_packing([&t](const float* in, const float* amax, float* out, uint8_t* c, uint32_t* s,
                       const uint8_t* rbits) FP4EMU_INLINE_LAMBDA {
        NvGroup<NvTe, R>(t, in, amax, out, c, s, rbits);
      });
      return;
    } else {
      if (k.family == KernelFamily::nvfp4_4over6) {
        Nv4over6Run<R>(k, t, x, n, y, codes, scales);
        return;
      }
      if (k.recipe->nv.rule == NvScaleRule::modelopt_fq) {  // fake-quant only
        run([&t](const float* in, const float*, float* out, uint8_t*, uint32_t*, const uint8_t*) {
          NvModeloptFqGroup<R>(t, in, out);
        });
        return;
      }
      WithNvPolicy(k.recipe->nv.rule, [&](auto policy) {
        using P = decltype(policy);
        run_packing([&t](const float* in, const float* amax, float* out, uint8_t* c, uint32_t* s,
                         const uint8_t*) FP4EMU_INLINE_LAMBDA {
          NvGroup<P, R>(t, in, amax, out, c, s, nullptr);
        });
      });
    }
  });
}

// One HiF4 family's quantize loop, a function of its own: inlined into
// QuantizeValues' switch, how well it compiled depended on the other cases'
// code. QuantizeRun inlines its block (called, it cost hif4.v14 quantize
// 0.6 AVX2 instructions per value: its frame and the rules' reloads).
template <Hif4Elements K, Rounding R>
HWY_NOINLINE void Hif4QuantizeRun(const KernelArgs& k, const float* HWY_RESTRICT x, int64_t n,
                                  uint8_t* HWY_RESTRICT codes, uint8_t* HWY_RESTRICT scales) {
  const Hif4Rules rules = Hif4RulesOf(*k.recipe);
  const ScaleBitOrder order = k.scale_bit_order;
  const NibbleOrder nibbles = k.nibble_order;
  QuantizeRun<kHif4Block, kHif4Block, 4, true>(
      nibbles, x, n, codes, scales,
      [&](const float* in, uint8_t* packed, uint32_t* scale, int64_t at) FP4EMU_INLINE_LAMBDA {
        const uint32_t word = Hif4QuantizeBlock<K, R>(rules, in, nibbles, packed, RbitsAt(k, at));
        scale[0] = reference::hif4_word_to_stored(word, order);  // inline, lsb_first returns the word
      });
}

// ---- Exported entry points ---------------------------------------------------

void FakeQuantValues(const KernelArgs& k, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  if (k.recipe->format == Format::nvfp4) return NvValues(k, x, n, y, nullptr, nullptr);
  WithRounding(k.rounding, [&](auto rounding) {
    constexpr Rounding R = decltype(rounding)::value;
    switch (k.family) {
      case KernelFamily::hif4_v14:
      case KernelFamily::hif4_amct:
      case KernelFamily::hif4_f64:
      case KernelFamily::hif4_a6: {
        const Hif4Rules rules = Hif4RulesOf(*k.recipe);
        WithHif4Elements(k, [&](auto elements) {
          constexpr Hif4Elements K = decltype(elements)::value;
          FakeQuantRun<kHif4Block>(x, y, n, [&](const float* in, float* out, int64_t at) {
            Hif4FakeQuantBlock<K, R>(rules, in, out, RbitsAt(k, at));
          });
        });
        break;
      }
      case KernelFamily::mxfp4_ggml: {
        const GgmlArgminRow* rows = k.ggml_argmin;
        FakeQuantRun<kMxBlock>(x, y, n, [rows](const float* in, float* out, int64_t) {
          MxGgmlFakeQuantBlock(rows, in, out);
        });
        break;
      }
      case KernelFamily::mxfp4: {
        const MxParams& p = k.recipe->mx;
        FakeQuantRun<kMxBlock>(x, y, n, [&](const float* in, float* out, int64_t at) {
          MxFakeQuantBlock<R>(p, in, out, RbitsAt(k, at));
        });
        break;
      }
      case KernelFamily::nvfp4:
      case KernelFamily::nvfp4_4over6:
      case KernelFamily::nvfp4_ggml: break;  // NvValues
    }
  });
}

void QuantizeValues(const KernelArgs& k, const float* HWY_RESTRICT x, int64_t n, uint8_t* HWY_RESTRICT codes,
                    uint8_t* HWY_RESTRICT scales) {
  if (k.recipe->format == Format::nvfp4) return NvValues(k, x, n, nullptr, codes, scales);
  WithRounding(k.rounding, [&](auto rounding) {
    constexpr Rounding R = decltype(rounding)::value;
    switch (k.family) {
      case KernelFamily::hif4_v14:
      case KernelFamily::hif4_amct:
      case KernelFamily::hif4_f64:
      case KernelFamily::hif4_a6:
        WithHif4Elements(k, [&](auto elements) {
          Hif4QuantizeRun<decltype(elements)::value, R>(k, x, n, codes, scales);
        });
        break;
      case KernelFamily::mxfp4_ggml: {  // inlined, unlike the convert recipes' block: 4.3 per value, 5.1 as a call
        const GgmlArgminRow* rows = k.ggml_argmin;
        const NibbleOrder nibbles = k.nibble_order;
        QuantizeRun<kMxBlock, kMxBlock, 1, true>(nibbles, x, n, codes, scales,
                                              [rows, nibbles](const float* in, uint8_t* packed, uint32_t* scale,
                                                              int64_t) FP4EMU_INLINE_LAMBDA {
                                                scale[0] = MxGgmlQuantize(rows, in, nibbles, packed);
                                              });
        break;
      }
      case KernelFamily::mxfp4: {
        const MxParams& p = k.recipe->mx;
        const NibbleOrder nibbles = k.nibble_order;
        QuantizeRun<kMxBlock, kMxBlock, 1, true>(nibbles, x, n, codes, scales,
                                              [&](const float* in, uint8_t* packed, uint32_t* scale,
                                                  int64_t at) FP4EMU_NOINLINE_LAMBDA {
                                                scale[0] = MxQuantizeBlock<R>(p, in, nibbles, packed, RbitsAt(k, at));
                                              });
        break;
      }
      case KernelFamily::nvfp4:
      case KernelFamily::nvfp4_4over6:
      case KernelFamily::nvfp4_ggml: break;  // NvValues
    }
  });
}

void DequantizeValues(const KernelArgs& k, const uint8_t* HWY_RESTRICT codes, const uint8_t* HWY_RESTRICT scales,
                      int64_t n, float* HWY_RESTRICT y) {
  switch (k.recipe->format) {
    case Format::hif4: {
      const ScaleBitOrder order = k.scale_bit_order;
      const bool pow2_scale = k.recipe->hif4.arithmetic == Hif4Arithmetic::pow2_v12;
      DequantizeRun<kHif4Block, kHif4Block>(k.nibble_order, 4, codes, scales, n, y,
                                [order, pow2_scale](const uint8_t* c, const uint8_t* s, float* out) {
                                  uint32_t stored = 0;
                                  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(s[i]) << (8 * i);
                                  Hif4DecodeBlock(pow2_scale, reference::hif4_word_from_stored(stored, order), c, out);
                                });
      break;
    }
    case Format::mxfp4:
      if (k.recipe->mx.element_select == MxElementSelect::ggml_argmin) {
        DequantizeRun<kMxBlock, 2 * kMxBlock>(k.nibble_order, 1, codes, scales, n, y,
                                [](const uint8_t* c, const uint8_t* s, float* out) { MxGgmlDecodeBlock(s[0], c, out); });
        break;
      }
      DequantizeRun<kMxBlock, 2 * kMxBlock>(k.nibble_order, 1, codes, scales, n, y,
                              [](const uint8_t* c, const uint8_t* s, float* out) { MxDecodeBlock(s[0], c, out); });
      break;
    case Format::nvfp4: {
      const NvTensorConstants t = NvConstants(k);
      DequantizeRun<kNvBlock, 4 * kNvBlock>(k.nibble_order, 1, codes, scales, n, y,
                              [&t](const uint8_t* c, const uint8_t* s, float* out) { NvDecodeBlock(t, s[0], c, out); });
      break;
    }
  }
}

float AbsMaxDroppingNan(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto acc = hn::Zero(di);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) acc = hn::Max(acc, AbsBitsDroppingNan(d, hn::LoadU(d, x + i)));
  int32_t best = hn::GetLane(hn::MaxOfLanes(di, acc));
  for (; i < n; ++i) {
    const int32_t bits = static_cast<int32_t>(std::bit_cast<uint32_t>(x[i]) & 0x7FFFFFFFu);
    if (bits <= kInfBits) best = std::max(best, bits);
  }
  return std::bit_cast<float>(best);
}

// One pass keeps the largest |x| bits (NaN lies above kInfBits) in four
// accumulators; only when a NaN was seen does a second pass find the
// NaN-dropping maximum and whether every value is NaN (AVX2, callgrind:
// 0.88 instructions per value with a running minimum for the latter, was 1.63).
AbsMaxStats AbsMaxStatsOf(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto max0 = hn::Zero(di), max1 = hn::Zero(di), max2 = hn::Zero(di), max3 = hn::Zero(di);
  int64_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    max0 = hn::Max(max0, AbsBits(d, hn::LoadU(d, x + i)));
    max1 = hn::Max(max1, AbsBits(d, hn::LoadU(d, x + i + lanes)));
    max2 = hn::Max(max2, AbsBits(d, hn::LoadU(d, x + i + 2 * lanes)));
    max3 = hn::Max(max3, AbsBits(d, hn::LoadU(d, x + i + 3 * lanes)));
  }
  for (; i + lanes <= n; i += lanes) max0 = hn::Max(max0, AbsBits(d, hn::LoadU(d, x + i)));
  int32_t most = hn::GetLane(hn::MaxOfLanes(di, hn::Max(hn::Max(max0, max1), hn::Max(max2, max3))));
  for (; i < n; ++i) most = std::max(most, static_cast<int32_t>(std::bit_cast<uint32_t>(x[i]) & 0x7FFFFFFFu));
  if (HWY_LIKELY(most <= kInfBits)) return {std::bit_cast<float>(most), false, n == 0};
  bool all_nan = true;
  for (int64_t j = 0; j < n && all_nan; ++j) all_nan = std::isnan(x[j]);
  return {AbsMaxDroppingNan(x, n), true, all_nan};
}

// One row of a 16x16 tile group (driver.cpp nv_tile_amax): the tile's lane
// maxima (fmaxf: NaN dropped) and the row's part of the tensor amax G, from
// the same loads. A row with a NaN takes AbsMaxStatsOf's facts (rare).
AbsMaxStats NvTileRowAmax(const float* HWY_RESTRICT x, int64_t n, float* HWY_RESTRICT lane_amax) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto most0 = hn::Zero(di), most1 = hn::Zero(di);  // the largest |x| bits, NaN included
  // Stores the vector at `at` into lane_amax, returns its |x| bits.
  auto step = [&](int64_t at) {
    const auto v = hn::LoadU(d, x + at);
    const auto tile = hn::Max(hn::BitCast(di, hn::LoadU(d, lane_amax + at)), AbsBitsDroppingNan(d, v));
    hn::StoreU(hn::BitCast(d, tile), d, lane_amax + at);
    return AbsBits(d, v);
  };
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {  // two vectors a step (AVX2, callgrind: 1.38 -> 1.14 per value)
    most0 = hn::Max(most0, step(i));
    most1 = hn::Max(most1, step(i + lanes));
  }
  for (; i + lanes <= n; i += lanes) most0 = hn::Max(most0, step(i));
  int32_t top = hn::GetLane(hn::MaxOfLanes(di, hn::Max(most0, most1)));
  for (; i < n; ++i) {
    const int32_t bits = static_cast<int32_t>(std::bit_cast<uint32_t>(x[i]) & 0x7FFFFFFFu);
    top = std::max(top, bits);
    if (bits <= kInfBits) lane_amax[i] = std::max(lane_amax[i], std::bit_cast<float>(bits));
  }
  if (HWY_LIKELY(top <= kInfBits)) return {std::bit_cast<float>(top), false, n == 0};
  return AbsMaxStatsOf(x, n);
}

void CodecOpValues(CodecOp op, Rounding rounding, const float* HWY_RESTRICT in, float* HWY_RESTRICT out, int64_t n,
                   const uint8_t* HWY_RESTRICT rbits) {
  const hn::CappedTag<float, 16> d;
  const hn::RebindToSigned<decltype(d)> di;
  int64_t i = 0;  // the lanes' position, for their random bytes
  auto each = [&](auto fn) {
    for (i = 0; i < n; i += static_cast<int64_t>(hn::Lanes(d))) hn::StoreU(fn(hn::LoadU(d, in + i)), d, out + i);
  };
  auto grid = [&](auto fn) { each([&](hn::Vec<decltype(d)> v) { return fn(v); }); };
  auto code = [&](auto fn) { each([&](hn::Vec<decltype(d)> v) { return hn::ConvertTo(d, fn(v)); }); };
  auto value = [&](auto fn) { each([&](hn::Vec<decltype(d)> v) { return fn(hn::ConvertTo(di, v)); }); };
  switch (op) {
    case CodecOp::e2m1_grid:
      return WithRounding(rounding, [&](auto r) {
        constexpr Rounding R = decltype(r)::value;
        grid([&](auto v) { return RoundToGrid<kE2M1, R>(d, v, RandomBytes<R>(d, rbits, i)); });
      });
    case CodecOp::s1p2_grid:
      return WithRounding(rounding, [&](auto r) {
        constexpr Rounding R = decltype(r)::value;
        grid([&](auto v) { return RoundToGrid<kS1P2, R>(d, v, RandomBytes<R>(d, rbits, i)); });
      });
    case CodecOp::ue4m3_grid: return grid([&](auto v) { return RoundToGrid<kUE4M3, Rounding::rne>(d, v); });
    case CodecOp::e6m2_grid: return grid([&](auto v) { return RoundToGrid<kE6M2, Rounding::rne>(d, v); });
    case CodecOp::bf16_grid: return grid([&](auto v) { return RoundToGrid<kBF16, Rounding::rne>(d, v); });
    case CodecOp::e2m1_code: return code([&](auto v) { return CodeOf<kE2M1>(d, v); });
    case CodecOp::s1p2_code: return code([&](auto v) { return CodeOf<kS1P2>(d, v); });
    case CodecOp::ue4m3_code: return code([&](auto v) { return CodeOf<kUE4M3>(d, v); });
    case CodecOp::e6m2_code: return code([&](auto v) { return CodeOf<kE6M2>(d, v); });
    case CodecOp::e2m1_value: return value([&](auto c) { return ValueOf<kE2M1>(d, c); });
    case CodecOp::s1p2_value: return value([&](auto c) { return ValueOf<kS1P2>(d, c); });
    case CodecOp::ue4m3_value: return value([&](auto c) { return ValueOf<kUE4M3>(d, c); });
    case CodecOp::e6m2_value: return value([&](auto c) { return ValueOf<kE6M2>(d, c); });
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fp4emu::simd {

HWY_EXPORT(FakeQuantValues);
HWY_EXPORT(QuantizeValues);
HWY_EXPORT(DequantizeValues);
HWY_EXPORT(AbsMaxDroppingNan);
HWY_EXPORT(AbsMaxStatsOf);
HWY_EXPORT(NvTileRowAmax);
HWY_EXPORT(TargetName);
HWY_EXPORT(CodecOpValues);

void fake_quant_values(const KernelArgs& k, const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(FakeQuantValues)(k, x, y, n);
}
void quantize_values(const KernelArgs& k, const float* x, int64_t n, uint8_t* codes, uint8_t* scales) {
  HWY_DYNAMIC_DISPATCH(QuantizeValues)(k, x, n, codes, scales);
}
void dequantize_values(const KernelArgs& k, const uint8_t* codes, const uint8_t* scales, int64_t n, float* y) {
  HWY_DYNAMIC_DISPATCH(DequantizeValues)(k, codes, scales, n, y);
}
float abs_max_dropping_nan(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(AbsMaxDroppingNan)(x, n); }
void codec_op(CodecOp op, Rounding rounding, const float* in, float* out, int64_t n, const uint8_t* rbits) {
  HWY_DYNAMIC_DISPATCH(CodecOpValues)(op, rounding, in, out, n, rbits);
}
AbsMaxStats abs_max_stats(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(AbsMaxStatsOf)(x, n); }
AbsMaxStats nv_tile_row_amax(const float* x, int64_t n, float* lane_amax) {
  return HWY_DYNAMIC_DISPATCH(NvTileRowAmax)(x, n, lane_amax);
}

std::vector<int64_t> compiled_targets() { return hwy::SupportedAndGeneratedTargets(); }
std::string target_name(int64_t target) { return hwy::TargetName(target); }
std::string dispatched_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
void force_target(int64_t target) { hwy::SetSupportedTargetsForTest(target); }

}  // namespace fp4emu::simd
#endif  // HWY_ONCE
