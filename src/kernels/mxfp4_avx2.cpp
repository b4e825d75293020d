// AVX2 MXFP4 GEMM over the packed 16-row groups (mxfp4.h), one half-group of 8 rows per 256-bit
// vector: per 32-block and half, four 32-byte loads hold the 8 rows' codes; pshufb decodes the
// low and high nibbles into the unsigned doubled table (2·v + 12), giving eight vectors whose
// int32 lane l holds 4 consecutive elements of row l. vpmaddubsw against a broadcast of 4 int8
// activations (pairs ≤ 2·24·127: no saturation) and vpmaddwd widen each to int32, summed onto
// −12 · Σ qs; the 8 rows' scales are d · 2^(e−128) (E8M0Half in vector form times d, the ref's
// product) and one FMA adds the block — the ref's arithmetic, lane for lane. A row tile of MR
// activation rows shares each decoded half-block (GemmTiling::mr).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/mxfp4.h"
#include "kernels/mxfp4_tiled.h"

namespace mx::avx2 {

namespace {

// E8M0Half of 8 bytes: 2^(e−128), e < 2 as fp32 subnormals.
inline __m256 E8M0Half8(const uint8_t* e8) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e8)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal));
}

// 4 int8 activations broadcast to every int32 lane.
inline __m256i Broadcast4(const int8_t* qs) {
  int32_t v;
  std::memcpy(&v, qs, 4);
  return _mm256_set1_epi32(v);
}

struct Tile {
  template <int MR>
  static void Run(const BlockQ8* x, int64_t nb, const uint8_t* gq, const uint8_t* ge, float* y,
                  int64_t ldy, int lo, int hi) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    const __m256i nibble = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* bq = gq + b * kMxGroupBlockBytes;
      for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7
        __m256i w[8];
        for (int c = 0; c < 4; ++c) {
          const __m256i raw =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq + 64 * c + 32 * h));
          w[c] = _mm256_shuffle_epi8(table, _mm256_and_si256(raw, nibble));
          w[c + 4] =
              _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble));
        }
        const __m256 p = E8M0Half8(ge + b * kMxRowGroup + 8 * h);
        for (int r = 0; r < MR; ++r) {
          const BlockQ8& xb = x[r * nb + b];
          __m256i dot = _mm256_set1_epi32(-12 * xb.sum);
          for (int v = 0; v < 8; ++v) {
            const __m256i pairs = _mm256_maddubs_epi16(w[v], Broadcast4(xb.qs + 4 * v));
            dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
          }
          const __m256 s = _mm256_mul_ps(_mm256_set1_ps(xb.d), p);
          acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc[r][h]);
        }
      }
    }
    for (int r = 0; r < MR; ++r) {
      if (lo == 0 && hi == kMxRowGroup) {
        _mm256_storeu_ps(y + r * ldy, acc[r][0]);
        _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
        continue;
      }
      alignas(32) float all[kMxRowGroup];  // a partial group: lanes lo..hi-1, packed to y
      _mm256_store_ps(all, acc[r][0]);
      _mm256_store_ps(all + 8, acc[r][1]);
      std::copy(all + lo, all + hi, y + r * ldy);
    }
  }
};

}  // namespace

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
               int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  GroupedGemmMxfp4<Tile>(x, m, wq, we, k, r0, r1, y, ldy, t);
}

}  // namespace mx::avx2
