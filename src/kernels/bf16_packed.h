// bf16 weight GEMM over W packed in groups of 16 rows, the layout the loader gives every bf16
// linear weight (model/weight_format.h). One bf16-pair dot instruction (vdpbf16ps) then serves 16
// output rows: int32-sized lane l of a vector holds 2 consecutive elements of row l, and the
// matching activation pair is broadcast to every lane, so a tile of MR activation rows × NR
// groups keeps MR·NR accumulators and needs no horizontal sums (the row-major kernels' tiles
// reduce 16 lanes per output and reload x per W row). Per group g and pair p (kp = ⌈k/2⌉ pairs;
// n padded with zero rows to a whole group, an odd k with a zero column):
//   wp[(g·kp + p)·32 + 2·l + e] = W[16g + l, 2p + e]
// One arithmetic for every tiling and batch: per output, one fp32 accumulator that takes the
// pairs in order p = 0, 1, ... (on AVX512_BF16 each step is one vdpbf16ps per activation part,
// smallest part first; elsewhere two FMAs, even element first), so the tilings, a row alone and
// any slice of W's rows all give the same bits. The activations come as the table's
// GemmActivations says (kernels.h): kFp32 exactly, kBf16 rounded to bf16 once per call.
// Legend: M activation rows, N output features, K input features.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/gemm_tiling.h"

namespace mx {

struct KernelTable;

inline constexpr int64_t kBf16RowGroup = 16;

inline int64_t Bf16Groups(int64_t n) { return (n + kBf16RowGroup - 1) / kBf16RowGroup; }
inline int64_t Bf16Pairs(int64_t k) { return (k + 1) / 2; }
// Elements (uint16) of the packed W [n, k].
inline int64_t Bf16PackedElems(int64_t n, int64_t k) {
  return Bf16Groups(n) * Bf16Pairs(k) * 2 * kBf16RowGroup;
}
// Row-major W [n, k] (row stride ldw) → packed (Bf16PackedElems(n, k) elements; the padding
// rows and column are zero).
void PackBf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, uint16_t* wp);
// Element [row, col] of a packed W with k columns.
inline uint16_t Bf16PackedAt(const uint16_t* wp, int64_t k, int64_t row, int64_t col) {
  const int64_t g = row / kBf16RowGroup, l = row % kBf16RowGroup;
  return wp[(g * Bf16Pairs(k) + col / 2) * 2 * kBf16RowGroup + 2 * l + col % 2];
}

// Kernel signature (KernelTable::gemm_bf16_packed): y[i·ldy + (j − r0)] = x_i · W[j]ᵀ for i < m,
// r0 <= j < r1; x rows at x + i·ldx (k values); W packed at wp (its group 0; rows of the last
// group past W's n are computed but never stored). `t`: t.mr activation rows per tile (1, 2, 4,
// 8; default 8), t.nb W rows per cache block (rounded up to whole groups). Nothing outside the
// slice is written.
using GemmBf16PackedFn = void (*)(const float* x, int64_t ldx, int64_t m, const uint16_t* wp,
                                  int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy,
                                  GemmTiling t);

namespace ref {
// x exactly / rounded to bf16 (X16); two fp32 FMAs per pair (the FMA levels' arithmetic).
void GemmBf16Packed(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                    int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
void GemmBf16PackedX16(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                       int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace ref
namespace avx2 {
void GemmBf16Packed(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                    int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace avx2
namespace avx512 {
// AVX-512 F without BF16: the FMA arithmetic, 16 lanes.
void GemmBf16PackedFma(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                       int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
// AVX512_BF16: vdpbf16ps on x split into three exact bf16 parts (kFp32) or rounded once (X16).
void GemmBf16PackedDot(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                       int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
void GemmBf16PackedDotX16(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                          int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t);
}  // namespace avx512

// Threaded wrapper: splits W's row groups over the pool; y [m, n] is poisoned with NaN first.
void GemmBf16Packed(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
                    const uint16_t* wp, int64_t n, float* y, GemmTiling t = {});

}  // namespace mx
