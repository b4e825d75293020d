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

// Tile::Run<MR, NR>(xs, i, wg, kp, p0, p1, y, ldy, lo, hi): y[r·ldy + c·16 + (l − lo)] =
// activation row i + r of xs (r < MR) · row l of group c (c < NR) of the groups at wg over pairs
// [p0, p1), added in order to what y holds when p0 > 0 (y is the fp32 accumulator of pairs
// [0, p0), so a K-blocked product has the bits of an unblocked one), for lo <= l < hi (NR > 1:
// whole groups, lo = 0, hi = 16). Tile::kGroups<MR> is its widest NR for a row tile of MR. The
// per-output arithmetic must not depend on MR or NR (bit-identical tilings).
//
// K blocks: W's rows at GLM-5.2's widths are 16k–32k bytes long (o_proj k = 16384), so one group
// of 16 rows is 512 KB and a row tile's pass over a few groups streamed MBs from L3 or memory for
// every tile of activation rows. With K in blocks of kc pairs, a tile's activations (MR·kc·4
// bytes) stay in L1 and the block's W rows (cb groups · kc · 64 bytes) in L2.

// Whole groups [g, g_end) for one row tile (y: the output of group g's first row), NR at a time,
// the rest in tiles of NR/2, ... 1 (a lone accumulator chain per row is latency-bound, so the
// narrow tiles come last).
template <typename Tile, int MR, int NR, typename X>
void WholeGroups(const X& xs, int64_t i, const uint16_t* wp, int64_t kp, int64_t p0, int64_t p1,
                 int64_t g, int64_t g_end, float* y, int64_t ldy) {
  const int64_t stride = kp * 2 * kBf16RowGroup;
  for (; g + NR <= g_end; g += NR, y += NR * kBf16RowGroup) {
    Tile::template Run<MR, NR>(xs, i, wp + g * stride, kp, p0, p1, y, ldy, 0, kBf16RowGroup);
  }
  if constexpr (NR > 1) WholeGroups<Tile, MR, NR / 2>(xs, i, wp, kp, p0, p1, g, g_end, y, ldy);
}

// Pairs per K block when the tiling leaves it to the kernel (t.kc = 0): rows of up to
// 2·kBf16AutoKc values are not blocked (the bench-scale widths), longer ones in blocks of
// kBf16AutoKc pairs, with W blocks of kBf16L2Block bytes unless t.nb says.
inline constexpr int64_t kBf16AutoKc = 256;
inline constexpr int64_t kBf16L2Block = 512 * 1024;
inline int64_t Bf16KBlock(const GemmTiling& t, int64_t kp) {
  if (t.kc > 0) return std::min<int64_t>(t.kc, kp);
  return kp > 2 * kBf16AutoKc ? kBf16AutoKc : kp;
}

template <typename Tile, typename X>
void GroupedGemmBf16(const X& xs, int64_t m, const uint16_t* wp, int64_t k, int64_t r0, int64_t r1,
                     float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  const int64_t kp = Bf16Pairs(k), stride = kp * 2 * kBf16RowGroup;
  const int mr = t.mr > 0 ? t.mr : 8;
  const int64_t kc = Bf16KBlock(t, kp);
  const int64_t g_first = r0 / kBf16RowGroup, g_end = Bf16Groups(r1);
  const int64_t cb = t.nb > 0  ? std::max<int64_t>(1, Bf16Groups(t.nb))
                     : kc < kp ? std::max<int64_t>(1, kBf16L2Block / (kc * 2 * kBf16RowGroup * 2))
                               : g_end - g_first;
  // The groups the slice holds whole.
  const int64_t w0 = Bf16Groups(r0), w1 = r1 / kBf16RowGroup;
  int64_t p0 = 0, p1 = kp;  // the K block ForEachTile's pass is over
  auto rows = [&]<int MR>(int64_t g0, int64_t g1, int64_t& i) {
    const int64_t a = std::clamp(w0, g0, g1), b = std::clamp(w1, a, g1);
    for (; i + MR <= m; i += MR) {
      float* yi = y + i * ldy;     // output row j of W at yi + (j − r0)
      auto cut = [&](int64_t g) {  // a group the slice cuts, alone
        const int64_t base = g * kBf16RowGroup;
        const int lo = static_cast<int>(std::max<int64_t>(r0 - base, 0));
        const int hi = static_cast<int>(std::min<int64_t>(r1 - base, kBf16RowGroup));
        Tile::template Run<MR, 1>(xs, i, wp + g * stride, kp, p0, p1, yi + (base + lo - r0), ldy,
                                  lo, hi);
      };
      for (int64_t g = g0; g < a; ++g) cut(g);
      WholeGroups<Tile, MR, Tile::template kGroups<MR>>(xs, i, wp, kp, p0, p1, a, b,
                                                        yi + (a * kBf16RowGroup - r0), ldy);
      for (int64_t g = b; g < g1; ++g) cut(g);
    }
  };
  for (int64_t g0 = g_first; g0 < g_end; g0 += cb) {
    for (p0 = 0; p0 < kp; p0 = p1) {
      p1 = std::min(kp, p0 + kc);
      ForEachTile(g0, std::min(g0 + cb, g_end), cb, mr, rows);
    }
  }
}

}  // namespace mx
