// MXFP4 weight × fp32 activation GEMM for the CPU (../shared/reference/mxfp4-and-fp8.md §5).
//
// Weights: MXFP4 [N, K] packed once at load (PackMxfp4) in groups of 16 rows (kMxRowGroup), so
// that one int8 dot-product instruction serves 16 output rows: int32 lane l of a vector holds 4
// consecutive elements of row l, and the 4 matching activation bytes are broadcast to every
// lane (ik_llama.cpp's repacked "r4/r8" layouts have the same idea). Per group g and 32-block b
// (nb = K/32 blocks; N padded with zero rows to a whole group):
//   codes  wq[(g·nb + b)·256 + c·64 + 4·l + t] = split-half byte 4c + t of row 16g + l
//   scales we[(g·nb + b)·16 + l]              = E8M0 scale of row 16g + l, block b
// where split-half byte s (< 16) of a block is code[s] | code[s + 16] << 4. So the low nibbles
// of the 64 bytes of chunk c are elements 4c..4c+3 of the 16 rows and the high nibbles
// elements 16 + 4c..16 + 4c+3.
// Activations: each row quantized to int8 blocks of 32 (BlockQ8: d = amax/127, qs = round(x/d),
// sum = Σ qs). The int8 dot products use the doubled E2M1 table shifted to unsigned
// (2·v + 12 ∈ [0, 24]) so that u8 × s8 instructions apply (vpdpbusd on AVX-512 VNNI,
// vpmaddubsw on AVX2); starting each block's integer sum at −12 · Σ qs removes the shift
// exactly. One arithmetic for every level, tiling and batch: per output
//   acc = 0; for b in order: acc = fma(float(Σ (2·v)·qs over block b), d_b · 2^(e_b − 128), acc)
// (the integer sum is exact, d · 2^(e−128) is one correctly rounded product), so the levels,
// the tilings, a row alone and any slice of W's rows all give the same bits.
// Error budget vs fp32 math on the dequantized weights: the int8 activation rounding
// (≤ d/2 per element, about 0.4 % of the block max) — mxfp4_test.cpp's kQ8Tol.
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

// x[k] → out[k/32]. REQUIRES: k % 32 == 0; x finite. Vectorised where the build allows;
// ref::QuantizeRowQ8 is the scalar twin (the same bits).
void QuantizeRowQ8(const float* x, int64_t k, BlockQ8* out);
namespace ref {
void QuantizeRowQ8(const float* x, int64_t k, BlockQ8* out);
}  // namespace ref

// Scale of one E8M0 byte for the doubled table: 2^(e − 128) (e = 0 gives 2^-128).
float E8M0Half(uint8_t e);

// ---- The packed weight layout (see the top of this file).
inline constexpr int64_t kMxRowGroup = 16;
inline constexpr int64_t kMxGroupBlockBytes = 256;  // code bytes of one group's 32-block

inline int64_t Mxfp4Groups(int64_t n) { return (n + kMxRowGroup - 1) / kMxRowGroup; }
// Bytes of the packed codes / scales of W [n, k] (n rounded up to a whole group).
inline int64_t Mxfp4PackedCodeBytes(int64_t n, int64_t k) {
  return Mxfp4Groups(n) * (k / 32) * kMxGroupBlockBytes;
}
inline int64_t Mxfp4PackedScaleBytes(int64_t n, int64_t k) {
  return Mxfp4Groups(n) * (k / 32) * kMxRowGroup;
}
// Split-half rows (row j: k/2 code bytes at q + j·k/2, k/32 scales at e + j·k/32) → the packed
// layout (pq: Mxfp4PackedCodeBytes, pe: Mxfp4PackedScaleBytes); the rows past n are zero.
void PackMxfp4(const uint8_t* q, const uint8_t* e, int64_t n, int64_t k, uint8_t* pq, uint8_t* pe);
// Row j of a packed W back in split-half order: k/2 code bytes to q, k/32 scales to e.
void UnpackMxfp4Row(const uint8_t* pq, const uint8_t* pe, int64_t k, int64_t j, uint8_t* q,
                    uint8_t* e);

// Kernel signature (KernelTable::gemm_mxfp4): y[i·ldy + (j − r0)] = Σ_k x_i[k] · W[j, k] for
// i < m and r0 <= j < r1, W packed at wq, we (its group 0; rows of W's last group past its n
// are computed but never stored, so r1 may end anywhere inside it); x is m rows of k/32 blocks.
// `t` (gemm_tiling.h): t.mr activation rows share each decoded weight block (default 8 on the
// SIMD levels); t.nb W rows per cache block (rounded up to whole groups). Nothing outside the
// slice is written. REQUIRES: ValidRowTile(t.mr).
using GemmMxfp4Fn = void (*)(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we,
                             int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy,
                             GemmTiling t);

namespace ref {
void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
               int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace ref
namespace avx2 {
void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
               int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace avx2
namespace avx512 {
void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
               int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace avx512

// Threaded wrapper: quantizes x [m, k] (fp32) to Q8 once, then splits W's row groups over the
// pool. y [m, n] is poisoned with NaN first.
void GemmMxfp4(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
               const uint8_t* wq, const uint8_t* we, int64_t n, float* y, GemmTiling t = {});

}  // namespace mx
