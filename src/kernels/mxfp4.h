// MXFP4 weight × fp32 activation GEMM for the CPU (../shared/reference/mxfp4-and-fp8.md §5).
//
// Weights: MXFP4 [N, K] in split-half order (per 32-block, byte j = code[j] | code[j+16] << 4;
// made once at load from Quark's layout by quant::RepackQuarkToSplitHalf): wq [N, K/2] and
// E8M0 scales we [N, K/32].
// Activations: each row quantized to int8 blocks of 32 (BlockQ8: d = amax/127, qs = round(x/d),
// sum = Σ qs). The int8 dot products use the doubled E2M1 table shifted to unsigned
// (2·v + 12 ∈ [0, 24]) so that u8 × s8 instructions apply (vpdpbusd on AVX-512 VNNI,
// vpmaddubsw on AVX2); the shift is removed exactly in the integer dot (the SIMD levels read the
// activations as a Q8Panel, mxfp4_tiled.h, whose per-lane bias is −12 · Σ qs), and each block's
// integer dot is scaled by d · 2^(e−128).
// Error budget vs fp32 math on the dequantized weights: the int8 activation rounding
// (≤ d/2 per element, about 0.4 % of the block max) — mxfp4_test.cpp's kQ8Tol. Between kernel
// levels only the float summation order differs (kLevelTol).
// Legend: M activation rows, N output features, K input features (K % 32 == 0).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/gemm_tiling.h"

namespace mx {

struct KernelTable;

struct BlockQ8 {
  float d;        // scale: x ≈ d · qs
  int32_t sum;    // Σ qs
  int8_t qs[32];  // quantized values
};
static_assert(sizeof(BlockQ8) == 40);

// x[k] → out[k/32]. REQUIRES: k % 32 == 0; x finite.
void QuantizeRowQ8(const float* x, int64_t k, BlockQ8* out);

// Scale of one E8M0 byte for the doubled table: 2^(e − 128) (e = 0 gives 2^-128).
float E8M0Half(uint8_t e);

// Kernel signature (KernelTable::gemm_mxfp4): y[i·ldy + j] = Σ_k x_i[k] · W[j, k] for i < m,
// j < n; x is m rows of k/32 blocks; W rows are wq + j·k/2, we + j·k/32. `t` (gemm_tiling.h):
// t.mr activation rows share each decoded weight block (default 4 on the SIMD levels); t.nb W
// rows per cache block. Every tiling gives bit-identical results (each output keeps its own
// accumulators and block order), and so do a row alone and a slice of W's rows. The SIMD levels
// re-lay x out once per call (Q8Panel, O(m·k)). REQUIRES: ValidRowTile(t.mr).
using GemmMxfp4Fn = void (*)(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we,
                             float* y, int64_t ldy, int64_t n, int64_t k, GemmTiling t);

namespace ref {
void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t);
}  // namespace ref
namespace avx2 {
void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t);
}  // namespace avx2
namespace avx512 {
void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t);
}  // namespace avx512

// Threaded wrapper: quantizes x [m, k] (fp32) to Q8 once, then splits N over the pool.
// y [m, n] is poisoned with NaN first.
void GemmMxfp4(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
               const uint8_t* wq, const uint8_t* we, int64_t n, float* y, GemmTiling t = {});

}  // namespace mx
