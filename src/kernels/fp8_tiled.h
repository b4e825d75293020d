// The loop order the per-ISA packed FP8 GEMMs share (fp8.h), the packed bf16 kernels' order
// (bf16_packed_tiled.h) on FP8's groups: W's row groups in cache blocks of t.nb rows
// (ForEachTile, gemm_tiling.h); within a block the activation rows in tiles of t.mr (the
// leftover rows in tiles of 4, 2, then 1), each tile against the block's whole groups NR at a
// time, and against a group the slice cuts alone. Included only by the ISA translation units;
// `Tile` and its activation source `X` are theirs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/fp8.h"

namespace mx {

// Tile::Run<MR, NR>(xs, i, wg, sg, k, y, ldy, lo, hi): y[r·ldy + c·16 + (l − lo)] = activation
// row i + r of xs (r < MR) · row l of group c (c < NR) of the groups at wg (codes) / sg
// (scales), for lo <= l < hi (NR > 1: whole groups, lo = 0, hi = 16). Tile::kGroups<MR> is its
// widest NR for a row tile of MR. The per-output arithmetic must not depend on MR or NR.
template <typename Tile>
struct Fp8GroupRuns {
  const uint8_t* wp;
  const float* sp;
  int64_t k, code_stride, scale_stride;

  template <int MR, int NR, typename X>
  void Whole(const X& xs, int64_t i, int64_t g, int64_t g_end, float* y, int64_t ldy) const {
    for (; g + NR <= g_end; g += NR, y += NR * kFp8RowGroup) {
      Tile::template Run<MR, NR>(xs, i, wp + g * code_stride, sp + g * scale_stride, k, y, ldy, 0,
                                 static_cast<int>(kFp8RowGroup));
    }
    if constexpr (NR > 1) Whole<MR, NR / 2>(xs, i, g, g_end, y, ldy);
  }
};

inline constexpr int64_t kFp8DefaultBlockRows = 128;
// Rows left past the whole tiles of 8 from which one more tile of 8 overlaps the last ones
// (ForEachTileOverlapped; fp8_bench rows 13, 14, 15: +5%, +10%, +33% GFLOP/s).
inline constexpr int64_t kFp8OverlapRows = 5;

template <typename Tile, typename X>
void GroupedGemmFp8(const X& xs, int64_t m, const uint8_t* wp, const float* sp, int64_t k,
                    int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  const Fp8GroupRuns<Tile> gs{wp, sp, k, Fp8Quads(k) * kFp8QuadBytes,
                              Fp8ScaleCols(k) * kFp8RowGroup};
  const int mr = t.mr > 0 ? t.mr : 8;
  const int64_t g_first = r0 / kFp8RowGroup, g_end = Fp8Groups(r1);
  // By default W goes in blocks of 128 rows (8 groups, 256 KiB at k = 2048), which a row tile
  // passes over while they sit in L2: one block of a whole thread's rows, as the bf16 kernels
  // default to, left the 2-thread FP8 GEMM at two thirds of the packed bf16 one.
  const int64_t cb = std::max<int64_t>(1, Fp8Groups(t.nb > 0 ? t.nb : kFp8DefaultBlockRows));
  const int64_t w0 = Fp8Groups(r0), w1 = r1 / kFp8RowGroup;  // the groups the slice holds whole
  auto rows = [&]<int MR>(int64_t g0, int64_t g1, int64_t& i) {
    const int64_t a = std::clamp(w0, g0, g1), b = std::clamp(w1, a, g1);
    for (; i + MR <= m; i += MR) {
      float* yi = y + i * ldy;     // output row j of W at yi + (j − r0)
      auto cut = [&](int64_t g) {  // a group the slice cuts, alone
        const int64_t base = g * kFp8RowGroup;
        const int lo = static_cast<int>(std::max<int64_t>(r0 - base, 0));
        const int hi = static_cast<int>(std::min<int64_t>(r1 - base, kFp8RowGroup));
        Tile::template Run<MR, 1>(xs, i, wp + g * gs.code_stride, sp + g * gs.scale_stride, k,
                                  yi + (base + lo - r0), ldy, lo, hi);
      };
      for (int64_t g = g0; g < a; ++g) cut(g);
      gs.template Whole<MR, Tile::template kGroups<MR>>(xs, i, a, b, yi + (a * kFp8RowGroup - r0),
                                                        ldy);
      for (int64_t g = b; g < g1; ++g) cut(g);
    }
  };
  ForEachTileOverlapped(g_first, g_end, cb, mr, m, kFp8OverlapRows, rows);
}

}  // namespace mx
