// FP8 block-scaled weight GEMM for the CPU: the official DeepSeek-V3 / GLM-5 FP8 checkpoints
// (../shared/DESIGN.md "Formats"): W [N, K] OCP e4m3fn codes and one fp32 scale per 128 × 128
// block, S [ceil(N/128), ceil(K/128)] (HF `weight_scale_inv`: the dequantized weight is
// value × scale). The last block along either dimension may be partial.
//
// Layout: the loader packs every FP8 weight once (PackFp8), like the bf16 weights
// (bf16_packed.h): 16-row groups of column quads, 64 bytes per group and quad q (columns
// 4q .. 4q + 3 = pairs 2q and 2q + 1, kq = K rounded up to 4, zero codes past K and N):
//   wp[(g·Q + q)·64 + 16·(j / 8) + 8·h + j % 8] = W[16g + j / 2, 2(2q + h) + j % 2], j < 32
// — the order in which vpunpck{l,h}bw of one 64-byte load give pair 2q's and pair 2q + 1's
// 32 codes as 16-bit lanes (row l's pair in lanes 2l, 2l + 1, as vdpbf16ps wants them). The
// scales are expanded per row and pre-multiplied by 2^8 (the codes decode to value · 2^-8):
//   sp[(g·KB + b)·16 + l] = 2^8 · S[row 16g + l's block row, b], or NaN where that row has a
//   NaN code (S.1111.111) in block b (the kernels decode NaN codes as finite 480 · 2^-8; the
//   NaN scale makes that block's contribution, hence the output, NaN at every level).
//
// Arithmetic. Each code decodes exactly to w' = e4m3 · 2^-8 (a bf16: sign, exponent + 112,
// mantissa; subnormal codes via a table). Per output and 128-column block b:
// - ref / AVX2 (FMA; the twins, bit-identical): E = Σ fma(x_2p, w'_2p) and O = Σ fma(x_2p+1,
//   w'_2p+1) over the block's pairs in order (two fp32 chains), then acc = fma(E + O, sp_b,
//   acc), blocks in order, acc from 0. Activations exact (kFp32) or rounded to bf16 once (X16).
// - AVX-512 BF16 (vdpbf16ps): the block sum B by vdpbf16ps over the block's pairs, x split into
//   three exact bf16 parts (kFp32, smallest first) or rounded once (X16), then
//   acc = fma(B, sp_b, acc). vdpbf16ps rounds inside (and its internal order differs between
//   vendors) and flushes denormals, so it meets the twins within fp32 summation error
//   (fp8_test.cpp kLevelTol), not bit for bit; its tilings, rows and slices are bit-identical.
// Legend: M activation rows, N output features, K input features, KB = ceil(K/128) blocks.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/gemm_tiling.h"

namespace mx {

struct KernelTable;

inline constexpr int64_t kFp8Block = 128;    // rows and columns per scale
inline constexpr int64_t kFp8RowGroup = 16;  // W rows per packed group
inline constexpr int64_t kFp8QuadBytes = 64;

inline int64_t Fp8ScaleCols(int64_t k) { return (k + kFp8Block - 1) / kFp8Block; }
inline int64_t Fp8Groups(int64_t n) { return (n + kFp8RowGroup - 1) / kFp8RowGroup; }
inline int64_t Fp8Quads(int64_t k) { return (k + 3) / 4; }
// Bytes of the packed codes and floats of the packed scales of W [n, k].
inline int64_t Fp8PackedBytes(int64_t n, int64_t k) {
  return Fp8Groups(n) * Fp8Quads(k) * kFp8QuadBytes;
}
inline int64_t Fp8PackedScales(int64_t n, int64_t k) {
  return Fp8Groups(n) * Fp8ScaleCols(k) * kFp8RowGroup;
}
// Row-major codes W [n, k] (row stride ldw) and their scales s (row j's are block row
// (phase + j) / 128, KB floats per block row) → packed (wp: Fp8PackedBytes, sp: Fp8PackedScales;
// padding codes 0, padding scales 0).
void PackFp8(const uint8_t* w, int64_t ldw, const float* s, int64_t phase, int64_t n, int64_t k,
             uint8_t* wp, float* sp);
// Code [row, col] of a packed W with k columns.
inline uint8_t Fp8PackedAt(const uint8_t* wp, int64_t k, int64_t row, int64_t col) {
  const int64_t g = row / kFp8RowGroup, j = 2 * (row % kFp8RowGroup) + col % 2, h = (col / 2) % 2;
  return wp[(g * Fp8Quads(k) + col / 4) * kFp8QuadBytes + 16 * (j / 8) + 8 * h + j % 8];
}
// The bf16 bits of e4m3 code c times 2^-8, exact (NaN codes: 480 · 2^-8; see above).
uint16_t Fp8CodeToBf16Scaled(uint8_t c);

// Kernel signature (KernelTable::gemm_fp8): y[i·ldy + (j − r0)] = x_i · W[j]ᵀ for i < m,
// r0 <= j < r1; x rows at x + i·ldx (k values); W packed at wp / sp (its group 0; rows of the
// last group past W's n are computed but never stored). `t`: t.mr activation rows per tile
// (1, 2, 4, 8; default 8), t.nb W rows per cache block (rounded up to whole groups). Nothing
// outside the slice is written.
using GemmFp8Fn = void (*)(const float* x, int64_t ldx, int64_t m, const uint8_t* wp,
                           const float* sp, int64_t k, int64_t r0, int64_t r1, float* y,
                           int64_t ldy, GemmTiling t);

namespace ref {
// The FMA arithmetic on x exactly / rounded to bf16 (X16).
void GemmFp8(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp, int64_t k,
             int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
void GemmFp8X16(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace ref
namespace avx2 {
// The FMA arithmetic (also the AVX-512 table's kernel on CPUs without AVX512_BF16).
void GemmFp8(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp, int64_t k,
             int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace avx2
namespace avx512 {
// AVX512_BF16 (+ VBMI2-free AVX-512 BW): vdpbf16ps, x in three exact parts / rounded once.
void GemmFp8Dot(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
void GemmFp8DotX16(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                   int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace avx512

// Threaded wrapper: y [m, n] poisoned with NaN, then W's row groups split over the pool.
void GemmFp8(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
             const uint8_t* wp, const float* sp, int64_t n, float* y, GemmTiling t = {});

}  // namespace mx
