// AVX2 MXFP4 GEMM (see mxfp4.h): per 32-block, pshufb decodes the 16 weight bytes into 32
// unsigned table values (2·v + 12), vpmaddubsw multiplies them with the int8 activations
// (pairs ≤ 2·24·127, no saturation), vpmaddwd widens to 8 int32 lanes, and one FMA per block
// applies d · 2^(e−128); 12 · Σ d·2^(e−128)·sum is subtracted at the end. A row tile of MR
// activation rows shares each decoded block (GemmTiling::mr).
#include <immintrin.h>

#include "kernels/mxfp4.h"
#include "kernels/mxfp4_tiled.h"

namespace mx::avx2 {

namespace {

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// y[r·ldy] = row r of x (r < MR, rows nb blocks apart) · one W row (qj, ej).
struct Tile {
  template <int MR>
  static void Run(const BlockQ8* x, int64_t nb, const uint8_t* qj, const uint8_t* ej, float* y,
                  int64_t ldy) {
    const __m128i lut = _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    const __m256i lut2 = _mm256_broadcastsi128_si256(lut);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MR];
    float corr[MR];
    for (int r = 0; r < MR; ++r) {
      acc[r] = _mm256_setzero_ps();
      corr[r] = 0.0f;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qj + b * 16));
      // [lo nibbles = elements 0..15 | hi nibbles = elements 16..31]
      const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
      const __m256i w = _mm256_shuffle_epi8(lut2, _mm256_and_si256(both, mask));
      const float e = E8M0Half(ej[b]);
      for (int r = 0; r < MR; ++r) {
        const BlockQ8& xb = x[r * nb + b];
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), ones);
        const float s = xb.d * e;
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(dot), acc[r]);
        corr[r] += s * static_cast<float>(xb.sum);
      }
    }
    for (int r = 0; r < MR; ++r) y[r * ldy] = HorizontalSum(acc[r]) - 12.0f * corr[r];
  }
};

}  // namespace

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t) {
  TiledGemmMxfp4<Tile>(x, m, wq, we, y, ldy, n, k, t);
}

}  // namespace mx::avx2
