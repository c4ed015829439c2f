#pragma once
// The whole public API of fp4emu (README "From C++"). Everything is in
// namespace fp4emu; every function reports bad input by throwing InputError.
//
// Start with quant/quantize.hpp: quantize, dequantize and fake_quant of a
// Tensor or of a view of caller memory (quant/view.hpp), with a recipe chosen
// by id or by handle (quant/recipe.hpp).
#include "fp4emu/error.hpp"
#include "fp4emu/threads.hpp"
#include "fp4emu/version.hpp"

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/codec/philox.hpp"
#include "fp4emu/codec/rounding.hpp"

#include "fp4emu/quant/diagnose.hpp"
#include "fp4emu/quant/hif4_params.hpp"
#include "fp4emu/quant/mxfp4_params.hpp"
#include "fp4emu/quant/nibbles.hpp"
#include "fp4emu/quant/nvfp4_params.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/reference.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "fp4emu/quant/sr_options.hpp"
#include "fp4emu/quant/stochastic.hpp"
#include "fp4emu/quant/tensor.hpp"
#include "fp4emu/quant/tensor_ref.hpp"
#include "fp4emu/quant/view.hpp"

#include "fp4emu/gemm/gemm.hpp"

#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/golden/suite.hpp"

#include "fp4emu/io/array.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/png.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/io/read_file.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/io/tensor_set.hpp"
#include "fp4emu/io/tensor_file.hpp"

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/gemm_f64.hpp"
#include "fp4emu/analysis/heatmap.hpp"
#include "fp4emu/analysis/identify.hpp"
#include "fp4emu/analysis/metrics.hpp"
#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/sample.hpp"
#include "fp4emu/analysis/sizes.hpp"
#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/analysis/transforms.hpp"
#include "fp4emu/analysis/underflow.hpp"
