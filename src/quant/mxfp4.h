// MXFP4 (OCP MX, E2M1 elements in blocks of 32 sharing one E8M0 scale): the bit-exact
// reference codec the quantizer writes with and every kernel is tested against.
// Facts, worked examples and layouts: ../shared/reference/mxfp4-and-fp8.md §1–§3.
//
// Scale rule per block (amax = max |x|):
//   kFloor (OCP, llama.cpp):  X = 2^(floor(log2 amax) − 2)
//   kEven  (Quark default):   amax's mantissa rounded to 1 bit first, so a block whose
//                             amax ≥ 1.75·2^e gets 2^(e − 1) and never clips by more than
//                             rounding.
// Both clamp the exponent to [−127, 127]; an all-zero block gets byte 0 (2^−127).
// Elements: v / X rounded half-to-even among {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating at 6;
// −0 keeps its sign (code 8), as Quark does.
//
// Layouts (K = elements per row, a multiple of 32):
//   Quark / HF:   packed[K/2], byte i = code[2i] | code[2i+1] << 4;  scales[K/32]
//   split-half:   per block, byte j = code[j] | code[j+16] << 4 (llama.cpp block_mxfp4.qs);
//                 made at load by RepackQuarkToSplitHalf, then interleaved 16 rows at a time
//                 into the kernels' packed layout (kernels/mxfp4.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mx::quant {

inline constexpr int kMxBlock = 32;

enum class ScaleMode : uint8_t { kFloor, kEven };
const char* ScaleModeName(ScaleMode m);  // "floor", "even" (Quark's scale_calculation_mode)
Result<ScaleMode> ParseScaleMode(std::string_view name);

// The E8M0 byte for a block whose largest magnitude is `amax` (finite, >= 0).
uint8_t E8M0ScaleFor(float amax, ScaleMode mode);

// Codes (one per byte, 0..15) and the E8M0 byte of one block of 32 values.
// Errors: InvalidArgument when a value is NaN or infinite (naming its index in the block).
Status QuantizeBlock(const float* x, ScaleMode mode, uint8_t codes[kMxBlock], uint8_t* scale);

// One row of K values (K % 32 == 0) in the Quark layout: packed[K/2], scales[K/32].
// Errors: InvalidArgument for a non-finite value (naming its column) or K % 32 != 0.
Status QuantizeRow(const float* x, int64_t k, ScaleMode mode, uint8_t* packed, uint8_t* scales);
// Same from bf16 bits.
Status QuantizeRowBf16(const uint16_t* x, int64_t k, ScaleMode mode, uint8_t* packed,
                       uint8_t* scales);

// Inverse of QuantizeRow (exact: every MXFP4 value is an fp32). REQUIRES: k % 32 == 0.
void DequantizeRow(const uint8_t* packed, const uint8_t* scales, int64_t k, float* out);

// Packs 32 codes: Quark/HF consecutive pairs, or llama.cpp split halves (16 bytes each).
void PackQuark(const uint8_t codes[kMxBlock], uint8_t out[kMxBlock / 2]);
void PackSplitHalf(const uint8_t codes[kMxBlock], uint8_t out[kMxBlock / 2]);
// Converts `n_blocks` blocks of Quark-packed bytes to split-half order (in != out).
void RepackQuarkToSplitHalf(const uint8_t* in, int64_t n_blocks, uint8_t* out);

}  // namespace mx::quant
