// FP8 block-scaled weight × fp32 activation GEMM for the CPU: the official DeepSeek-V3 /
// GLM-5 FP8 checkpoints (../shared/DESIGN.md "Formats"): W [N, K] OCP e4m3fn bytes as stored,
// and one fp32 scale per 128 × 128 block, S [ceil(N/128), ceil(K/128)] (HF `weight_scale_inv`:
// the dequantized weight is value × scale). The last block along either dimension may be
// partial.
//
// Arithmetic (every level): each weight is dequantized to fp32 exactly as
// fp32(e4m3(w) · s) — the one rounding PyTorch's `weight.float() * scale` makes — and the
// activations are used as fp32, so the result differs from fp32 math on the dequantized
// weights only by summation order (fp8_test.cpp's kLevelTol), with no activation rounding.
// note: e4m3 → fp32 rather than bf16 for vdpbf16ps or int8 for vpdpbusd: fp32 keeps the
// activations exact like GemmActivations::kFp32 (the model fixtures' precision) at 16 FMAs
// per instruction, more than the 32/3 products of the exact three-part vdpbf16ps bf16 GEMM,
// and needs only AVX2 / AVX-512F; the decode (sign-extend, shift, mask, one multiply by
// s·2^120) is shared by every activation row of a tile. NaN codes (S.1111.111) give NaN
// outputs at every level.
// Legend: M activation rows, N output features, K input features, KB = ceil(K/128) blocks.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/gemm_tiling.h"

namespace mx {

struct KernelTable;

inline constexpr int64_t kFp8Block = 128;  // rows and columns per scale

inline int64_t Fp8ScaleCols(int64_t k) { return (k + kFp8Block - 1) / kFp8Block; }

// Kernel signature (KernelTable::gemm_fp8):
//   y[i·ldy + j] = Σ_t x[i·ldx + t] · fp32(e4m3(w[j·k + t]) · s[((phase + j) / 128)·KB + t/128])
// for i < m, j < n: W's row 0 is row `phase` (0..127) of the 128-row block whose scales start
// at s, so a slice of W's rows passes its first row's block and phase. `t` as in gemm_tiling.h
// (default row tile 4); every tiling, a row alone and a slice of W's rows give bit-identical
// results. REQUIRES: 0 <= phase < 128; ValidRowTile(t.mr); y aliases nothing.
using GemmFp8Fn = void (*)(const float* x, int64_t ldx, const uint8_t* w, const float* s,
                           int64_t phase, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k,
                           GemmTiling t);

namespace ref {
void GemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase, float* y,
             int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t);
}  // namespace ref
namespace avx2 {
void GemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase, float* y,
             int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t);
}  // namespace avx2
namespace avx512 {
void GemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase, float* y,
             int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t);
}  // namespace avx512

// Threaded wrapper: y [m, n] poisoned with NaN, then N split over the pool (each worker a
// contiguous block of W rows with its own block and phase).
void GemmFp8(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
             const uint8_t* w, const float* s, int64_t phase, int64_t n, float* y,
             GemmTiling t = {});

}  // namespace mx
