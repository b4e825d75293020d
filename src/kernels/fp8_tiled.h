// The loop order the per-ISA FP8 GEMMs (fp8_avx2.cpp, fp8_avx512.cpp) share: W in column blocks
// of t.nb rows, within a block the activation rows in tiles of t.mr (the leftover rows in tiles
// of 2, then 1), each tile against every W row of the block, Tile::kWRows<MR> W rows at a time.
// Included only by the ISA translation units; `Tile` is theirs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/fp8.h"

namespace mx {

// Default row tile of the SIMD FP8 kernels (GemmTiling::mr = 0).
inline constexpr int kFp8DefaultRowTile = 4;

// Tile::Run<MR, NR>(x, ldx, w, k, sc, y, ldy): y[r·ldy + c] = x row r (r < MR) · dequantized W
// row c (c < NR; rows k bytes apart from w, W row c's block scales at sc[c]), NR =
// Tile::kWRows<MR> or 1 for the leftover W rows; the per-output arithmetic must not depend on
// MR or NR (bit-identical tilings).
template <typename Tile>
void TiledGemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase,
                  float* y, int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t) {
  if (m <= 0 || n <= 0) return;
  const int64_t kb = Fp8ScaleCols(k);
  const int mr = t.mr > 0 ? t.mr : kFp8DefaultRowTile;
  const int64_t cb = t.nb > 0 ? t.nb : n;
  auto scales = [&](int64_t j) { return s + (phase + j) / kFp8Block * kb; };
  auto rows = [&]<int MR>(int64_t j0, int64_t nj, int64_t& i) {
    constexpr int NR = Tile::template kWRows<MR>;
    for (; i + MR <= m; i += MR) {
      int64_t j = j0;
      for (; j + NR <= j0 + nj; j += NR) {
        const float* sc[NR];
        for (int c = 0; c < NR; ++c) sc[c] = scales(j + c);
        Tile::template Run<MR, NR>(x + i * ldx, ldx, w + j * k, k, sc, y + i * ldy + j, ldy);
      }
      for (; j < j0 + nj; ++j) {
        const float* sc[1] = {scales(j)};
        Tile::template Run<MR, 1>(x + i * ldx, ldx, w + j * k, k, sc, y + i * ldy + j, ldy);
      }
    }
  };
  for (int64_t j0 = 0; j0 < n; j0 += cb) {
    const int64_t nj = std::min(cb, n - j0);
    int64_t i = 0;
    if (mr >= 4) rows.template operator()<4>(j0, nj, i);
    if (mr >= 2) rows.template operator()<2>(j0, nj, i);
    rows.template operator()<1>(j0, nj, i);
  }
}

}  // namespace mx
