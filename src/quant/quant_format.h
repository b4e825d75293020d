// Quantized checkpoint formats as a table (ggml's type_traits: block size, bytes per block, the
// row codec): what `mxserve quantize --format NAME` writes and the loader reads back. One entry
// today, MXFP4 in the Quark / HF layout; FP8 is one more. The in-memory side (the kernels'
// layout, slicing, GEMMs) is model/weight_format.h, whose quantized entries point here.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "quant/mxfp4.h"

namespace mx::quant {

// A quantized weight W[n, k] is two tensors: the codes, U8 [n, k / block · code_bytes], under
// the weight's own name, and the scales, U8 [n, k / block], under "<weight name><scale_suffix>".
struct QuantFormat {
  const char* name;          // --format: "mxfp4"
  int64_t block;             // elements per scale along k; k must be a multiple
  int64_t code_bytes;        // code bytes per block
  const char* scale_suffix;  // "_scale" (model.layers.0.mlp.down_proj.weight_scale)
  // One row of k values (bf16 bits / fp32) to codes[k / block · code_bytes], scales[k / block].
  // Errors: InvalidArgument naming the column of a non-finite value.
  Status (*encode_bf16)(const uint16_t* x, int64_t k, ScaleMode mode, uint8_t* codes,
                        uint8_t* scales);
  Status (*encode_f32)(const float* x, int64_t k, ScaleMode mode, uint8_t* codes, uint8_t* scales);
  // The inverse (exact for MXFP4: every code times its scale is an fp32).
  void (*decode)(const uint8_t* codes, const uint8_t* scales, int64_t k, float* out);
};

std::span<const QuantFormat> QuantFormats();
const QuantFormat& Mxfp4Format();
// Errors: InvalidArgument naming `name` and the formats there are.
Result<const QuantFormat*> FindQuantFormat(std::string_view name);

}  // namespace mx::quant
