// The loop order the per-ISA packed bf16 GEMMs share (bf16_packed.h): W's row groups in cache
// blocks of t.nb rows; within a block the activation rows in tiles of t.mr (the leftover rows in
// tiles of 4, 2, then 1), each tile against the block's whole groups NR at a time, and against a
// group the slice cuts (or a leftover group) alone. Included only by the ISA translation units;
// `Tile` and its activation source `X` are theirs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/bf16_packed.h"

namespace mx {

// The fp32 activations of the FMA kernels, read in place: row i at x + i·ldx, k values.
struct PackedBf16FloatX {
  const float* x;
  int64_t ldx, k;
};

// Tile::Run<MR, NR>(xs, i, wg, kp, y, ldy, lo, hi): y[r·ldy + c·16 + (l − lo)] = activation row
// i + r of xs (r < MR) · row l of group c (c < NR) of the groups at wg, for lo <= l < hi
// (NR > 1: whole groups, lo = 0, hi = 16). Tile::kGroups<MR> is its widest NR for a row tile of
// MR. The per-output arithmetic must not depend on MR or NR (bit-identical tilings).

// Whole groups [g, g_end) for one row tile (y: the output of group g's first row), NR at a time,
// the rest in tiles of NR/2, ... 1 (a lone accumulator chain per row is latency-bound, so the
// narrow tiles come last).
template <typename Tile, int MR, int NR, typename X>
void WholeGroups(const X& xs, int64_t i, const uint16_t* wp, int64_t kp, int64_t g, int64_t g_end,
                 float* y, int64_t ldy) {
  const int64_t stride = kp * 2 * kBf16RowGroup;
  for (; g + NR <= g_end; g += NR, y += NR * kBf16RowGroup) {
    Tile::template Run<MR, NR>(xs, i, wp + g * stride, kp, y, ldy, 0, kBf16RowGroup);
  }
  if constexpr (NR > 1) WholeGroups<Tile, MR, NR / 2>(xs, i, wp, kp, g, g_end, y, ldy);
}

template <typename Tile, typename X>
void GroupedGemmBf16(const X& xs, int64_t m, const uint16_t* wp, int64_t k, int64_t r0, int64_t r1,
                     float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  const int64_t kp = Bf16Pairs(k), stride = kp * 2 * kBf16RowGroup;
  const int mr = t.mr > 0 ? t.mr : 8;
  const int64_t g_first = r0 / kBf16RowGroup, g_end = Bf16Groups(r1);
  const int64_t cb = t.nb > 0 ? std::max<int64_t>(1, Bf16Groups(t.nb)) : g_end - g_first;
  // The groups the slice holds whole.
  const int64_t w0 = Bf16Groups(r0), w1 = r1 / kBf16RowGroup;
  auto rows = [&]<int MR>(int64_t g0, int64_t g1, int64_t& i) {
    const int64_t a = std::clamp(w0, g0, g1), b = std::clamp(w1, a, g1);
    for (; i + MR <= m; i += MR) {
      float* yi = y + i * ldy;     // output row j of W at yi + (j − r0)
      auto cut = [&](int64_t g) {  // a group the slice cuts, alone
        const int64_t base = g * kBf16RowGroup;
        const int lo = static_cast<int>(std::max<int64_t>(r0 - base, 0));
        const int hi = static_cast<int>(std::min<int64_t>(r1 - base, kBf16RowGroup));
        Tile::template Run<MR, 1>(xs, i, wp + g * stride, kp, yi + (base + lo - r0), ldy, lo, hi);
      };
      for (int64_t g = g0; g < a; ++g) cut(g);
      WholeGroups<Tile, MR, Tile::template kGroups<MR>>(xs, i, wp, kp, a, b,
                                                        yi + (a * kBf16RowGroup - r0), ldy);
      for (int64_t g = b; g < g1; ++g) cut(g);
    }
  };
  ForEachTile(g_first, g_end, cb, mr, rows);
}

}  // namespace mx
