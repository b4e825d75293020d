// The loop order the per-ISA MXFP4 GEMMs (mxfp4_avx2.cpp, mxfp4_avx512.cpp) share: W's row
// groups (mxfp4.h's packed layout) in cache blocks of t.nb rows, within a block the activation
// rows in tiles of t.mr (the leftover rows in tiles of 4, 2, then 1), each tile against every group
// of the block. Included only by the ISA translation units; `Tile` is theirs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/mxfp4.h"

namespace mx {

// Default row tile of the SIMD MXFP4 kernels (GemmTiling::mr = 0).
inline constexpr int kMxfp4DefaultRowTile = 8;
// Rows left past the whole tiles of 8 from which one more tile of 8 overlaps the last ones
// (ForEachTileOverlapped, gemm_tiling.h): `gemm_bench m=12,...,16 shapes=2048x6144,6144x2048`,
// overlapping from 5: rows 13 and 14 −1–12%, 15 +3–10% GFLOP/s; so only 7 left.
inline constexpr int64_t kMxfp4OverlapRows = 7;

// Tile::Run<MR>(x, nb, gq, ge, y, ldy, lo, hi): y[r·ldy + (l − lo)] = activation row r (r < MR,
// rows nb blocks apart from x) · row l of the group at gq, ge, for lo <= l < hi. Its per-output
// arithmetic must not depend on MR (bit-identical tilings).
// Optionally Tile::RunGroups<NG>(x, nb, gq, ge, y): one activation row against NG consecutive
// whole groups at once, y[16·j + l] = x · row l of group j, with Run<1>'s arithmetic per output.
// A single row (decode) then streams NG groups together instead of one: the memory-level
// parallelism a lone stream with its prefetch lacks (a 1 × 2048 × 6144 GEMV read its weights at
// ~54% of the 2-thread bandwidth one group at a time).
// Consecutive whole groups a single-row pass streams at once.
inline constexpr int kMxfp4RowStreams = 4;

template <typename Tile>
concept Mxfp4GroupRun = requires(const BlockQ8* x, const uint8_t* q, float* y) {
  Tile::template RunGroups<kMxfp4RowStreams>(x, int64_t{1}, q, q, y);
};

template <typename Tile>
void GroupedGemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
                      int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  const int64_t nb = k / 32;
  const int mr = t.mr > 0 ? t.mr : kMxfp4DefaultRowTile;
  const int64_t g_first = r0 / kMxRowGroup, g_end = (r1 + kMxRowGroup - 1) / kMxRowGroup;
  const int64_t cb =
      t.nb > 0 ? std::max<int64_t>(1, (t.nb + kMxRowGroup - 1) / kMxRowGroup) : g_end - g_first;
  auto rows = [&]<int MR>(int64_t g0, int64_t g1, int64_t& i) {
    for (; i + MR <= m; i += MR) {
      auto one = [&](int64_t g) {
        const int64_t base = g * kMxRowGroup;
        const int lo = static_cast<int>(std::max<int64_t>(r0 - base, 0));
        const int hi = static_cast<int>(std::min<int64_t>(r1 - base, kMxRowGroup));
        Tile::template Run<MR>(x + i * nb, nb, wq + g * nb * kMxGroupBlockBytes,
                               we + g * nb * kMxRowGroup, y + i * ldy + (base + lo - r0), ldy, lo,
                               hi);
      };
      int64_t g = g0;
      if constexpr (MR == 1 && Mxfp4GroupRun<Tile>) {
        // Groups the slice cuts alone; the whole ones kMxfp4RowStreams at a time.
        const int64_t whole0 = std::clamp((r0 + kMxRowGroup - 1) / kMxRowGroup, g0, g1);
        const int64_t whole1 = std::clamp(r1 / kMxRowGroup, whole0, g1);
        for (; g < whole0; ++g) one(g);
        for (; g + kMxfp4RowStreams <= whole1; g += kMxfp4RowStreams) {
          Tile::template RunGroups<kMxfp4RowStreams>(
              x + i * nb, nb, wq + g * nb * kMxGroupBlockBytes, we + g * nb * kMxRowGroup,
              y + i * ldy + (g * kMxRowGroup - r0));
        }
      }
      for (; g < g1; ++g) one(g);
    }
  };
  ForEachTileOverlapped(g_first, g_end, cb, mr, m, kMxfp4OverlapRows, rows);
}

}  // namespace mx
