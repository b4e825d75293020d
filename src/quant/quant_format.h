// Quantized checkpoint formats as a table (ggml's type_traits: block size, bytes per block, the
// codec): what `mxserve quantize --format NAME` writes and the loader reads back. MXFP4 in the
// Quark / HF layout (a scale per row and 32 columns) and FP8 in the DeepSeek / HF layout (a
// scale per 128 × 128 block). The in-memory side (the kernels' layout, slicing, GEMMs) is
// model/weight_format.h, whose quantized entries point here.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/dtype.h"
#include "base/status.h"
#include "quant/mxfp4.h"

namespace mx::quant {

// A quantized weight W[n, k] is two tensors: the codes, code_dtype [n, ceil(k / block) ·
// code_bytes], under the weight's own name, and the scales, scale_dtype [ceil(n / block_rows),
// ceil(k / block)], under "<weight name><scale_suffix>".
struct QuantFormat {
  const char* name;          // --format: "mxfp4", "fp8"
  int64_t block;             // elements per scale along k
  int64_t block_rows;        // rows per scale: 1 (MXFP4) or 128 (FP8's 128 × 128 blocks)
  int64_t code_bytes;        // code bytes per block of one row (the last block may be partial
                             // when k need not be a multiple: FP8, one byte per element)
  bool partial_blocks;       // k need not be a multiple of `block` (FP8); else it must (MXFP4)
  DType code_dtype;          // U8 (packed E2M1), F8_E4M3
  DType scale_dtype;         // U8 (E8M0), F32
  const char* scale_suffix;  // "_scale" (model.layers.0.mlp.down_proj.weight_scale), "_scale_inv"
  // A panel of `rows` (<= block_rows) rows of k fp32 values to codes [rows, k / block ·
  // code_bytes] and scales [ceil(k / block)] of scale_dtype (raw bytes). Errors:
  // InvalidArgument naming the row (numbered from `row0`, the panel's first row in its tensor)
  // and the column of a non-finite value.
  Status (*encode)(const float* x, int64_t rows, int64_t k, ScaleMode mode, int64_t row0,
                   uint8_t* codes, uint8_t* scales);
  // The inverse, exact (every code times its scale is rounded to fp32 once).
  void (*decode)(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t k, float* out);
};

std::span<const QuantFormat> QuantFormats();
const QuantFormat& Mxfp4Format();
const QuantFormat& Fp8Format();
// Errors: InvalidArgument naming `name` and the formats there are.
Result<const QuantFormat*> FindQuantFormat(std::string_view name);

}  // namespace mx::quant
