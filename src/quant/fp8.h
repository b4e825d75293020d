// The FP8 block-scaled codec of the official DeepSeek-V3 / GLM-5 FP8 checkpoints: e4m3fn codes
// [n, k] and one fp32 scale per 128 × 128 block, [ceil(n/128), ceil(k/128)], stored as
// `weight_scale_inv` (dequantized = code value × scale). Bit-exact reference used by
// `mxserve quantize --format fp8` and, decoding, by `--format mxfp4` from an FP8 input.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace mx::quant {

inline constexpr int64_t kFp8BlockSize = 128;  // rows and columns per scale

// One panel of `rows` (<= 128) rows of k fp32 values, a block row of the weight, to codes
// [rows, k] and scales[ceil(k/128)] (fp32, as raw bytes): per 128-column block
// scale = amax / 448 (fp32 division; 1 for a block of zeros, so that no 0/0 arises), each code =
// e4m3fn(x / scale) rounded to nearest even and saturated at ±448 (DeepSeek's and vLLM's block
// cast: the block's amax maps to 448). Errors: InvalidArgument naming the row (numbered from
// row0) and the column of a NaN or Inf value.
Status Fp8EncodePanel(const float* x, int64_t rows, int64_t k, int64_t row0, uint8_t* codes,
                      uint8_t* scales);
// The inverse: out[r·k + t] = fp32(e4m3(codes[r·k + t]) · scale[t / 128]).
void Fp8DecodePanel(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t k,
                    float* out);

}  // namespace mx::quant
