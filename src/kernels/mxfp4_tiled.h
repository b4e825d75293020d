// The loop order shared by the per-ISA MXFP4 GEMMs (mxfp4_avx2.cpp, mxfp4_avx512.cpp): W in
// column blocks of t.nb rows, within a block the activation rows in tiles of t.mr (then the
// leftover rows one at a time), each tile against every W row of the block. Included only by
// the ISA translation units; `Tile` is theirs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/mxfp4.h"

namespace mx {

// Tile::Run<MR>(x, nb, qj, ej, y, ldy): y[r·ldy] = row r of x (r < MR, rows nb blocks apart) ·
// the W row (qj, ej).
template <typename Tile>
void TiledGemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
                    int64_t ldy, int64_t n, int64_t k, GemmTiling t) {
  const int64_t nb = k / 32;
  const int64_t cb = t.nb > 0 ? t.nb : n;
  auto rows = [&]<int MR>(int64_t j0, int64_t nj, int64_t& i) {
    for (; i + MR <= m; i += MR) {
      for (int64_t j = j0; j < j0 + nj; ++j) {
        Tile::template Run<MR>(x + i * nb, nb, wq + j * nb * 16, we + j * nb, y + i * ldy + j, ldy);
      }
    }
  };
  for (int64_t j0 = 0; j0 < n; j0 += cb) {
    const int64_t nj = std::min(cb, n - j0);
    int64_t i = 0;
    if (t.mr == 4) rows.template operator()<4>(j0, nj, i);
    if (t.mr == 2) rows.template operator()<2>(j0, nj, i);
    rows.template operator()<1>(j0, nj, i);
  }
}

}  // namespace mx
