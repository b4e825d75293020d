// AVX2 GEMM over packed bf16 weights (bf16_packed.h), a group of 16 W rows as two 8-lane
// halves: per pair of k values each half's 32 bytes widen to fp32 (even element: the low half
// shifted up; odd: the high half masked) and take two FMAs per activation row, even element
// first — the ref's arithmetic exactly. kBf16 activations reach it already rounded (the table's
// X16 wrapper).
#include <immintrin.h>

#include <algorithm>

#include "kernels/bf16_packed.h"
#include "kernels/bf16_packed_tiled.h"
#include "kernels/weight_prefetch.h"

namespace mx::avx2 {

namespace {

struct Tile {
  template <int MR>
  static constexpr int kGroups = MR >= 4   ? 1
                                 : MR == 2 ? 2
                                           : 3;

  template <int MR, int NR>
  static void Run(const PackedBf16FloatX& xs, int64_t i, const uint16_t* wg, int64_t kp, int64_t p0,
                  int64_t p1, float* y, int64_t ldy, int lo, int hi) {
    const int64_t stride = kp * 2 * kBf16RowGroup;
    const __m256i high = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
    __m256 acc[MR][NR][2];
    for (int r = 0; r < MR; ++r) {
      for (int c = 0; c < NR; ++c) {
        // zero at the first K block, else what the previous block stored
        alignas(32) float all[kBf16RowGroup] = {};
        if (p0 > 0)
          std::copy(y + r * ldy + c * kBf16RowGroup, y + r * ldy + c * kBf16RowGroup + (hi - lo),
                    all + lo);
        acc[r][c][0] = _mm256_load_ps(all);
        acc[r][c][1] = _mm256_load_ps(all + 8);
      }
    }
    for (int64_t p = p0; p < p1; ++p) {
      __m256 we[NR][2], wo[NR][2];
      for (int c = 0; c < NR; ++c) {
        const uint16_t* wc = wg + c * stride + p * 2 * kBf16RowGroup;
        PrefetchWeights<MR == 1>(wc);
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wc + 16 * h));
          we[c][h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
          wo[c][h] = _mm256_castsi256_ps(_mm256_and_si256(v, high));
        }
      }
      const bool odd = 2 * p + 1 < xs.k;  // the padding column pairs with x = 0
      for (int r = 0; r < MR; ++r) {
        const float* xr = xs.x + (i + r) * xs.ldx + 2 * p;
        const __m256 xe = _mm256_set1_ps(xr[0]);
        const __m256 xo = _mm256_set1_ps(odd ? xr[1] : 0.0f);
        for (int c = 0; c < NR; ++c) {
          for (int h = 0; h < 2; ++h) {
            acc[r][c][h] = _mm256_fmadd_ps(xe, we[c][h], acc[r][c][h]);
            acc[r][c][h] = _mm256_fmadd_ps(xo, wo[c][h], acc[r][c][h]);
          }
        }
      }
    }
    for (int r = 0; r < MR; ++r) {
      for (int c = 0; c < NR; ++c) {
        alignas(32) float all[kBf16RowGroup];
        _mm256_store_ps(all, acc[r][c][0]);
        _mm256_store_ps(all + 8, acc[r][c][1]);
        std::copy(all + lo, all + hi, y + r * ldy + c * kBf16RowGroup);
      }
    }
  }
};

}  // namespace

void GemmBf16Packed(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                    int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  GroupedGemmBf16<Tile>(PackedBf16FloatX{x, ldx, k}, m, wp, k, r0, r1, y, ldy, t);
}

}  // namespace mx::avx2
