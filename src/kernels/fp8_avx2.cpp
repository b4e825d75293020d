// AVX2 + FMA GEMM over packed FP8 weights (fp8.h; loop order fp8_tiled.h): the FMA arithmetic,
// the ref's bits. A group's 16 rows as four 8-lane vectors of 4 rows × (even, odd) element, so
// each lane is one of the ref's two chains (E, O) of one row: per pair, 8 codes per vector
// (vpmovsxbd, << 20, mask: sign, exponent and mantissa where an fp32 has them, the value ·
// 2^-120 exactly, subnormals included; one multiply by 2^112 gives the value · 2^-8 as the ref
// decodes it) and one FMA against the broadcast activation pair. At each block's end E + O per
// row (one horizontal add) takes one FMA with the rows' scales. Two activation rows share each
// decoded vector (eight independent chains).
#include <immintrin.h>

#include <algorithm>

#include "kernels/fp8.h"
#include "kernels/fp8_tiled.h"
#include "kernels/weight_prefetch.h"

namespace mx::avx2 {

namespace {

// The fp32 activations, read in place: row i at x + i·ldx, k values.
struct FloatX {
  const float* x;
  int64_t ldx, k;
};

// Rows [i, i + R) (R = 1, 2) of xs against one group: out[r][l] for the group's 16 rows.
template <int R>
void Group(const FloatX& xs, int64_t i, const uint8_t* wg, const float* sg, int64_t k,
           float (*out)[kFp8RowGroup]) {
  const __m256i field = _mm256_set1_epi32(static_cast<int32_t>(0x87F00000u));
  const __m256 two112 = _mm256_set1_ps(0x1p112f);
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const int64_t nq = Fp8Quads(k), kb = Fp8ScaleCols(k), full_pairs = k / 2;
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < kb; ++b) {
    __m256 ch[R][4];  // rows 4a .. 4a + 3, (E, O) interleaved
    for (int r = 0; r < R; ++r) {
      for (auto& v : ch[r]) v = _mm256_setzero_ps();
    }
    const int64_t q_end = std::min(nq, (b + 1) * (kFp8Block / 4));
    for (int64_t q = b * (kFp8Block / 4); q < q_end; ++q) {
      const uint8_t* wq = wg + q * kFp8QuadBytes;
      PrefetchWeights<R == 1>(wq);
      for (int h = 0; h < 2; ++h) {
        const int64_t p = 2 * q + h;
        __m256 xp[R];
        for (int r = 0; r < R; ++r) {
          const float* xr = xs.x + (i + r) * xs.ldx + 2 * p;
          if (p < full_pairs) {
            xp[r] = _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(xr)));
          } else {  // the padding column(s) pair with x = 0
            const float e = 2 * p < k ? xr[0] : 0.0f;
            xp[r] = _mm256_setr_ps(e, 0, e, 0, e, 0, e, 0);
          }
        }
        for (int a = 0; a < 4; ++a) {
          const __m128i bytes =
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wq + 16 * a + 8 * h));
          const __m256i bits =
              _mm256_and_si256(_mm256_slli_epi32(_mm256_cvtepi8_epi32(bytes), 20), field);
          const __m256 w = _mm256_mul_ps(_mm256_castsi256_ps(bits), two112);
          for (int r = 0; r < R; ++r) ch[r][a] = _mm256_fmadd_ps(xp[r], w, ch[r][a]);
        }
      }
    }
    for (int hv = 0; hv < 2; ++hv) {  // rows 8hv .. 8hv + 7
      const __m256 sv = _mm256_loadu_ps(sg + b * kFp8RowGroup + 8 * hv);
      for (int r = 0; r < R; ++r) {
        const __m256 bs = _mm256_permutevar8x32_ps(_mm256_hadd_ps(ch[r][2 * hv], ch[r][2 * hv + 1]),
                                                   order);  // E + O, rows in order
        acc[r][hv] = _mm256_fmadd_ps(bs, sv, acc[r][hv]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(out[r], acc[r][0]);
    _mm256_storeu_ps(out[r] + 8, acc[r][1]);
  }
}

struct Tile {
  template <int MR>
  static constexpr int kGroups = 1;

  template <int MR, int NR>
  static void Run(const FloatX& xs, int64_t i, const uint8_t* wg, const float* sg, int64_t k,
                  float* y, int64_t ldy, int lo, int hi) {
    static_assert(NR == 1);
    float out[2][kFp8RowGroup];
    for (int r = 0; r < MR; r += 2) {
      const int rows = std::min(2, MR - r);
      if (rows == 2) {
        Group<2>(xs, i + r, wg, sg, k, out);
      } else {
        Group<1>(xs, i + r, wg, sg, k, out);
      }
      for (int rr = 0; rr < rows; ++rr) std::copy(out[rr] + lo, out[rr] + hi, y + (r + rr) * ldy);
    }
  }
};

}  // namespace

void GemmFp8(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp, int64_t k,
             int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  GroupedGemmFp8<Tile>(FloatX{x, ldx, k}, m, wp, sp, k, r0, r1, y, ldy, t);
}

}  // namespace mx::avx2
