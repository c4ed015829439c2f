// Quantize one MXFP4 block with a recipe chosen by id and read its bits;
// fake-quantize with a recipe chosen by handle.
#include <cstdio>
#include <vector>

#include <fp4emu/fp4emu.hpp>

int main() {
  std::vector<float> x(32, 1.0f);  // one MXFP4 block: 6, then 31 ones
  x[0] = 6.0f;

  fp4emu::QuantOptions options;
  options.recipe = "mxfp4.ocp";
  const fp4emu::TensorView view = fp4emu::f32_view(x, {1, 32});  // read in place, not copied
  const fp4emu::PackedHeader header = fp4emu::packed_header(view.shape, options);
  std::vector<uint8_t> codes(header.code_bytes()), scales(header.scale_bytes());
  fp4emu::quantize(view, options, codes, scales);
  // amax 6: E8M0 scale 2^0 (byte 127); 6 is E2M1 code 0x7, 1 is 0x2, two
  // codes per byte, the first in the low nibble.
  std::printf("scale 0x%02x, codes 0x%02x 0x%02x\n", scales[0], codes[0], codes[1]);

  std::vector<float> y(x.size());
  options.recipe = fp4emu::default_recipe(fp4emu::Format::nvfp4);  // nvfp4.te
  fp4emu::fake_quant(view, options, fp4emu::output_view(y, view.shape));
  std::printf("%s: %g %g\n", options.recipe.name().c_str(), y[0], y[1]);

  // The same calls on an owning Tensor {shape, values} return a PackedTensor or a Tensor.
  const fp4emu::Tensor t{{1, 32}, x};
  const fp4emu::PackedTensor p = fp4emu::quantize(t, options);
  const fp4emu::Tensor z = fp4emu::dequantize(p);  // bit-identical to fake_quant(t, options)

  return scales[0] == 0x7f && codes[0] == 0x27 && codes[1] == 0x22 && y[0] == 6.0f && y[1] == 1.0f && z.data == y
             ? 0
             : 1;
}
