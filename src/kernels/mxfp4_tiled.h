// What the per-ISA MXFP4 GEMMs (mxfp4_avx2.cpp, mxfp4_avx512.cpp) share: the activation panel
// they read instead of BlockQ8 (built once per kernel call) and the loop order — W in column
// blocks of t.nb rows, within a block the activation rows in tiles of t.mr (the leftover rows in
// tiles of 2, then 1), each tile against every W row of the block. Included only by the ISA
// translation units and mxfp4.cpp; `Tile` is theirs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "kernels/mxfp4.h"

namespace mx {

// m rows of BlockQ8 re-laid out so that a SIMD step loads its activations with aligned vector
// loads and removes the +12 shift of the unsigned weight table inside the integer dot:
// per row, per block b (the row padded with zero blocks to nbp = nb rounded up to 16):
//   lo[b·16 + t] = qs[t], hi[b·16 + t] = qs[16 + t]                      (t < 16)
//   bias[b·4 + l] = −12 · (Σ qs[4l..4l+3] + Σ qs[16+4l..16+4l+3])           (l < 4)
//   d[b] = the block scale
// The decoded weights of one block fill one 128-bit lane (its low nibbles = elements 0..15, its
// high nibbles = elements 16..31), so int32 lane l of that block's vpdpbusd (or vpmaddubsw +
// vpmaddwd) sums exactly the 8 elements bias lane l covers: lane + bias = Σ (2·v) · qs, exact.
// Thread-safety: immutable after construction.
class Q8Panel {
 public:
  Q8Panel(const BlockQ8* x, int64_t m, int64_t nb);

  int64_t nb() const { return nb_; }
  const int8_t* lo(int64_t i) const { return reinterpret_cast<const int8_t*>(Row(i)); }
  const int8_t* hi(int64_t i) const { return reinterpret_cast<const int8_t*>(Row(i) + nbp_ * 16); }
  const int32_t* bias(int64_t i) const {
    return reinterpret_cast<const int32_t*>(Row(i) + nbp_ * 32);
  }
  const float* d(int64_t i) const { return reinterpret_cast<const float*>(Row(i) + nbp_ * 48); }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  const uint8_t* Row(int64_t i) const { return buf_.get() + i * nbp_ * kBytesPerBlock; }

  static constexpr int64_t kBytesPerBlock = 16 + 16 + 16 + 4;  // lo, hi, bias, d
  int64_t nb_, nbp_;
  std::unique_ptr<uint8_t[], Free> buf_;  // 64-byte aligned; every row's arrays are too
};

// Rows i .. i + MR − 1 of a panel, as a tile walks them. note: always_inline because this header
// is compiled with each ISA's flags; an out-of-line copy from the AVX-512 unit must never run.
template <int MR>
struct Q8Rows {
  [[gnu::always_inline]] Q8Rows(const Q8Panel& p, int64_t i) {
    for (int r = 0; r < MR; ++r) {
      lo[r] = p.lo(i + r);
      hi[r] = p.hi(i + r);
      bias[r] = p.bias(i + r);
      d[r] = p.d(i + r);
    }
  }
  const int8_t* lo[MR];
  const int8_t* hi[MR];
  const int32_t* bias[MR];
  const float* d[MR];
};

// Default row tile of the SIMD MXFP4 kernels (GemmTiling::mr = 0).
inline constexpr int kMxfp4DefaultRowTile = 4;

// Tile::Run<MR, NR>(p, i, qj, ej, y, ldy): y[r·ldy + c] = row i + r of p (r < MR) · W row c
// (c < NR; W rows k/32 blocks apart from qj, ej), NR = Tile::kWRows<MR> or 1 for the leftover
// W rows; the per-output arithmetic must not depend on MR or NR (bit-identical tilings).
template <typename Tile>
void TiledGemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
                    int64_t ldy, int64_t n, int64_t k, GemmTiling t) {
  if (m <= 0 || n <= 0) return;
  const int64_t nb = k / 32;
  const Q8Panel p(x, m, nb);
  const int mr = t.mr > 0 ? t.mr : kMxfp4DefaultRowTile;
  const int64_t cb = t.nb > 0 ? t.nb : n;
  auto rows = [&]<int MR>(int64_t j0, int64_t nj, int64_t& i) {
    constexpr int NR = Tile::template kWRows<MR>;
    for (; i + MR <= m; i += MR) {
      int64_t j = j0;
      for (; j + NR <= j0 + nj; j += NR) {
        Tile::template Run<MR, NR>(p, i, wq + j * nb * 16, we + j * nb, y + i * ldy + j, ldy);
      }
      for (; j < j0 + nj; ++j) {
        Tile::template Run<MR, 1>(p, i, wq + j * nb * 16, we + j * nb, y + i * ldy + j, ldy);
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
