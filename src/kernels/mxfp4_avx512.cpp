// AVX-512 VNNI MXFP4 GEMM (see mxfp4.h): two 32-blocks per 512-bit step; vpshufb decodes
// 32 weight bytes into 64 unsigned table values ordered [blk0 0..15 | blk0 16..31 | blk1 0..15 |
// blk1 16..31], vpdpbusd accumulates u8 × s8 into 16 int32 lanes (8 per block), one FMA with
// the two blocks' scales; an odd last block takes a 256-bit vpdpbusd step. A row tile of MR
// activation rows shares each decoded pair of blocks (GemmTiling::mr).
#include <immintrin.h>

#include "kernels/mxfp4.h"
#include "kernels/mxfp4_tiled.h"

namespace mx::avx512 {

namespace {

// y[r·ldy] = row r of x (r < MR, rows nb blocks apart) · one W row (qj, ej).
struct Tile {
  template <int MR>
  static void Run(const BlockQ8* x, int64_t nb, const uint8_t* qj, const uint8_t* ej, float* y,
                  int64_t ldy) {
    const __m128i lut = _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    const __m512i lut4 = _mm512_broadcast_i32x4(lut);
    const __m256i lut2 = _mm256_broadcastsi128_si256(lut);
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m256i mask2 = _mm256_set1_epi8(0x0f);
    const __m512i order = _mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7);
    __m512 acc[MR];
    float corr[MR], tail[MR];
    for (int r = 0; r < MR; ++r) {
      acc[r] = _mm512_setzero_ps();
      corr[r] = tail[r] = 0.0f;
    }
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qj + b * 16));
      // [b0 lo | b1 lo | b0 hi | b1 hi] → [b0 lo | b0 hi | b1 lo | b1 hi]
      const __m512i both = _mm512_permutexvar_epi64(
          order, _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1));
      const __m512i w = _mm512_shuffle_epi8(lut4, _mm512_and_si512(both, mask));
      const float e0 = E8M0Half(ej[b]), e1 = E8M0Half(ej[b + 1]);
      for (int r = 0; r < MR; ++r) {
        const BlockQ8* xi = x + r * nb;
        const __m512i a = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xi[b].qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xi[b + 1].qs)), 1);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);
        const float s0 = xi[b].d * e0;
        const float s1 = xi[b + 1].d * e1;
        const __m512 sv = _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
        acc[r] = _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(dot), acc[r]);
        corr[r] += s0 * static_cast<float>(xi[b].sum) + s1 * static_cast<float>(xi[b + 1].sum);
      }
    }
    if (b < nb) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qj + b * 16));
      const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
      const __m256i w = _mm256_shuffle_epi8(lut2, _mm256_and_si256(both, mask2));
      const float e = E8M0Half(ej[b]);
      for (int r = 0; r < MR; ++r) {
        const BlockQ8& xb = x[r * nb + b];
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
        const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a);
        const float s = xb.d * e;
        const __m128i d4 =
            _mm_add_epi32(_mm256_castsi256_si128(dot), _mm256_extracti128_si256(dot, 1));
        const __m128i d2 = _mm_add_epi32(d4, _mm_shuffle_epi32(d4, 0x4e));
        const __m128i d1 = _mm_add_epi32(d2, _mm_shuffle_epi32(d2, 0xb1));
        tail[r] = s * static_cast<float>(_mm_cvtsi128_si32(d1));
        corr[r] += s * static_cast<float>(xb.sum);
      }
    }
    for (int r = 0; r < MR; ++r)
      y[r * ldy] = _mm512_reduce_add_ps(acc[r]) + tail[r] - 12.0f * corr[r];
  }
};

}  // namespace

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t) {
  TiledGemmMxfp4<Tile>(x, m, wq, we, y, ldy, n, k, t);
}

}  // namespace mx::avx512
