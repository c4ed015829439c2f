// The per-format operations table (reference.hpp FormatOps): each format's
// block functions behind one signature, and the stored form of its scales.
#include "fp4emu/quant/reference.hpp"

namespace fp4emu::reference {
namespace {

float nvfp4_amax(const Recipe& recipe, const BlockContext& context, const float* x) {
  return context.tile_amax ? *context.tile_amax : nvfp4_block_amax(recipe, x, kNvBlock);
}

constexpr FormatOps kHif4Ops{
    .quantize_block = [](const Recipe& recipe, Rounding rounding, const BlockContext&, const float* x,
                         uint8_t* codes, const uint8_t* rbits) -> uint32_t {
      return hif4_quantize_block(recipe, rounding, x, codes, rbits);
    },
    .fake_quant_block = [](const Recipe& recipe, Rounding rounding, const BlockContext&, const float* x, float* out,
                           const uint8_t* rbits) { hif4_fake_quant_block(recipe, rounding, x, out, rbits); },
    .decode_block = [](const Recipe& recipe, const NvTensorScale&, uint32_t scale, const uint8_t* codes,
                       float* out) { hif4_decode_block(recipe, scale, codes, out); },
    .decode_block_unscaled = [](const Recipe& recipe, uint32_t scale, const uint8_t* codes, float* out) {
      hif4_decode_block(recipe, scale, codes, out);
    },
};

constexpr FormatOps kMxfp4Ops{
    .quantize_block = [](const Recipe& recipe, Rounding rounding, const BlockContext&, const float* x,
                         uint8_t* codes, const uint8_t* rbits) -> uint32_t {
      return mxfp4_quantize_block(recipe, rounding, x, codes, rbits);
    },
    .fake_quant_block = [](const Recipe& recipe, Rounding rounding, const BlockContext&, const float* x, float* out,
                           const uint8_t* rbits) { mxfp4_fake_quant_block(recipe, rounding, x, out, rbits); },
    .decode_block = [](const Recipe& recipe, const NvTensorScale&, uint32_t scale, const uint8_t* codes,
                       float* out) { mxfp4_decode_block(recipe, static_cast<uint8_t>(scale), codes, out); },
    .decode_block_unscaled = [](const Recipe& recipe, uint32_t scale, const uint8_t* codes, float* out) {
      mxfp4_decode_block(recipe, static_cast<uint8_t>(scale), codes, out);
    },
};

constexpr FormatOps kNvfp4Ops{
    .quantize_block = [](const Recipe& recipe, Rounding rounding, const BlockContext& context, const float* x,
                         uint8_t* codes, const uint8_t* rbits) -> uint32_t {
      return nvfp4_quantize_block(recipe, rounding, context.tensor, nvfp4_amax(recipe, context, x), x, codes, rbits);
    },
    .fake_quant_block = [](const Recipe& recipe, Rounding rounding, const BlockContext& context, const float* x,
                           float* out, const uint8_t* rbits) {
      nvfp4_fake_quant_block(recipe, rounding, context.tensor, nvfp4_amax(recipe, context, x), x, out, rbits);
    },
    .decode_block = [](const Recipe& recipe, const NvTensorScale& tensor, uint32_t scale, const uint8_t* codes,
                       float* out) { nvfp4_decode_block(recipe, tensor, static_cast<uint8_t>(scale), codes, out); },
    .decode_block_unscaled = [](const Recipe& recipe, uint32_t scale, const uint8_t* codes, float* out) {
      nvfp4_decode_block_unscaled(recipe, static_cast<uint8_t>(scale), codes, out);
    },
};

}  // namespace

const FormatOps& format_ops(Format format) {
  switch (format) {
    case Format::hif4: return kHif4Ops;
    case Format::mxfp4: return kMxfp4Ops;
    case Format::nvfp4: return kNvfp4Ops;
  }
  return kMxfp4Ops;  // unreachable: Format has three values
}

}  // namespace fp4emu::reference
