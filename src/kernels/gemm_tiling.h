// How a fast GEMM walks its output: the tunable part of the bf16 / f32 / MXFP4 kernels
// (tune/moe_tuning.h picks it per MoE shape and token bucket; `mxserve tune moe` measures
// it). A tiling changes only the loop order and which rows share a loaded weight vector, never
// the per-element arithmetic beyond fp32 summation order, so every tiling stays within the
// kernels' error budgets (kernels_test.cpp, mxfp4_test.cpp). The ref level ignores it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mx {

// How far ahead (bytes) the GEMMs over packed weights (bf16, FP8, MXFP4) prefetch each weight
// stream. A tile of one activation row (decode) reads its weights once, from memory, several
// row-group streams at a time: it prefetches kWeightPrefetchAhead into L2 (_MM_HINT_T1). On an
// AMD EPYC VM (2026-12-07) such a GEMV read 10–20% slower with its prefetches 1 KB ahead into L1
// (_MM_HINT_T0, as before) than 256 bytes ahead, and 1 KB ahead into L2 was another 0–6% faster
// (bf16, FP8; MXFP4 the same): prefetches into L1 likely hold the few L1 fill buffers that the
// loads themselves need. Tiles of several rows (prefill) keep kPrefillPrefetchAhead into L1: with
// the decode's prefetch a bench-scale 512-token prefill ran ~7% slower.
// docs/performance.md, "Prefetch distance".
inline constexpr int64_t kWeightPrefetchAhead = 1024;
inline constexpr int64_t kPrefillPrefetchAhead = 1024;

struct GemmTiling {
  // Activation rows that share each loaded (bf16 widened / MXFP4 decoded) weight vector:
  // 1, 2, 4 or 8 (8: the MXFP4 kernels; the float kernels take 4); 0 = the level's default
  // (bf16/f32: 4 rows, MXFP4: 8 rows).
  int mr = 0;
  // W rows (output columns) per cache block: every row tile passes over one block before the
  // next starts, so the block stays in L1/L2 while it is reused. 0 = W as one block.
  int nb = 0;
  // Pairs of K (2 input features) per K block of the packed bf16 kernels: every output's fp32
  // accumulator is stored and taken up again between blocks (the same bits as one pass). 0 = the
  // kernel's choice (bf16_packed_tiled.h: none up to 512 pairs, else 256).
  int kc = 0;

  bool operator==(const GemmTiling&) const = default;
};

// The row tiles a level accepts.
inline bool ValidRowTile(int mr) { return mr == 0 || mr == 1 || mr == 2 || mr == 4 || mr == 8; }

// ForEachTile (below) for kernels whose tiles store their outputs whole (no partial sums kept in y
// between calls, as the FP8 and MXFP4 ones): past the last whole tile of 8 rows, `overlap` or more
// rows left (of m) go in one more tile of 8 ending at the last row. Its first rows are computed
// again, to the same bits (a row's arithmetic does not depend on its tile), at less cost than the
// tiles of 4, 2 and 1 that would follow, each of which decodes the weights again.
template <typename Rows>
void ForEachTileOverlapped(int64_t g_first, int64_t g_end, int64_t cb, int mr, int64_t m,
                           int64_t overlap, Rows rows) {
  for (int64_t g0 = g_first; g0 < g_end; g0 += cb) {
    const int64_t g1 = std::min(g0 + cb, g_end);
    int64_t i = 0;
    if (mr >= 8) {
      rows.template operator()<8>(g0, g1, i);
      if (m >= 8 && m - i >= std::max<int64_t>(overlap, 1)) {
        i = m - 8;
        rows.template operator()<8>(g0, g1, i);
      }
    }
    if (mr >= 4) rows.template operator()<4>(g0, g1, i);
    if (mr >= 2) rows.template operator()<2>(g0, g1, i);
    rows.template operator()<1>(g0, g1, i);
  }
}

// The outer loops of the grouped (packed-weight) kernels: W's row groups [g_first, g_end) in
// cache blocks of cb groups, within a block the activation rows in tiles of mr (≥ 8, 4, 2) and
// the leftover rows in smaller tiles down to 1: rows.template operator()<MR>(g0, g1, i) runs
// tiles of MR rows from row i while they fit and leaves i at the first row it did not take.
template <typename Rows>
void ForEachTile(int64_t g_first, int64_t g_end, int64_t cb, int mr, Rows rows) {
  ForEachTileOverlapped(g_first, g_end, cb, mr, 0, 0, rows);  // m = 0: no overlapped tile
}

}  // namespace mx
