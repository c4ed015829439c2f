#pragma once
// PackedTensor on disk: a .safetensors file (docs/architecture.md §7), readable without
// fp4emu. Tensors:
//   codes   U8  [..., padded_len/2]  two 4-bit codes per byte, block axis last
//   scales  U8  [..., blocks]        E8M0 (MXFP4) or UE4M3 (NVFP4) bytes
//           U32 [..., blocks]        HiF4 scale words (little-endian)
//           U8  in a kernel-ready layout when metadata scale_layout is
//               swizzled_128x4 or hif4_cube (scale_layout.hpp gives the
//               shapes and byte maps)
//   global_scale F32 [3]             NVFP4 only: global amax, S_enc, S_dec
// where "..." is the input shape without the block axis. The "__metadata__"
// header names format, recipe, shape, axis, packing and the fp4emu version;
// floats are also written as exact hex ("%a") strings.
#include <filesystem>
#include <map>
#include <string>

#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/scale_layout.hpp"

namespace fp4emu {

// `scales` is stored in `scale_layout` (InputError if the layout does not
// apply to the format). read_packed undoes the layout: the PackedTensor it
// returns always holds linear scales.
void write_packed(const std::filesystem::path& path, const PackedTensor& packed,
                  StoredScaleLayout scale_layout = StoredScaleLayout::linear);
PackedTensor read_packed(const std::filesystem::path& path);

// The metadata map written to the header (exposed for tests and tools).
std::map<std::string, std::string> packed_metadata(const PackedTensor& packed);

}  // namespace fp4emu
