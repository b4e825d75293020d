// AVX2 MXFP4 GEMM (see mxfp4.h; the activation panel is mxfp4_tiled.h's Q8Panel): two 32-blocks
// (32 weight bytes) per 256-bit step. pshufb decodes the low and the high nibbles into the
// unsigned doubled table (2·v + 12), one 128-bit lane per block; vpmaddubsw multiplies them with
// the int8 activations (pairs ≤ 2·24·127, the two halves' sum ≤ 12192: no saturation), vpmaddwd
// widens to int32 and the panel's bias removes the +12 shift exactly; one FMA per step applies
// the two blocks' scales d · 2^(e−128). The scales come 8 blocks at a time (E8M0Half in vector
// form times the panel's d, exactly the ref's product) and one vpermps per step spreads each
// block's scale over its lane. Two accumulators per output (even and odd steps) hide the FMA
// latency. A row tile of MR activation rows shares each decoded step (GemmTiling::mr); the last
// partial group of 8 blocks reads its weights and exponents from a zero-padded copy.
#include <immintrin.h>

#include <cstring>

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

// E8M0Half of 8 bytes (the low 64 bits of e8): 2^(e−128), e < 2 as fp32 subnormals.
inline __m256 E8M0Half8(__m128i e8) {
  const __m256i e = _mm256_cvtepu8_epi32(e8);
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal));
}

// Blocks b, b+1 (split-half weight bytes w) into acc; idx picks their scales out of s.
template <int MR>
[[gnu::always_inline]] inline void Step(__m256i w, __m256i table, int64_t b, __m256i idx,
                                        const __m256 (&s)[MR], const Q8Rows<MR>& rows,
                                        __m256 (&acc)[MR]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i wl = _mm256_shuffle_epi8(table, _mm256_and_si256(w, mask));
  const __m256i wh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(w, 4), mask));
  for (int r = 0; r < MR; ++r) {
    const auto* lo = reinterpret_cast<const __m256i*>(rows.lo[r] + b * 16);
    const auto* hi = reinterpret_cast<const __m256i*>(rows.hi[r] + b * 16);
    const auto* bias = reinterpret_cast<const __m256i*>(rows.bias[r] + b * 4);
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(wl, _mm256_load_si256(lo)),
                                           _mm256_maddubs_epi16(wh, _mm256_load_si256(hi)));
    const __m256i dot =
        _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), _mm256_load_si256(bias));
    acc[r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(s[r], idx), _mm256_cvtepi32_ps(dot), acc[r]);
  }
}

// Blocks g..g+7 of qj (256 bytes) and their exponents e8 (8 bytes) into acc0 / acc1.
template <int MR>
[[gnu::always_inline]] inline void Group(const uint8_t* qg, __m128i e8, int64_t g, int steps,
                                         const Q8Rows<MR>& rows, __m256 (&acc0)[MR],
                                         __m256 (&acc1)[MR]) {
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m256 e = E8M0Half8(e8);
  __m256 s[MR];
  for (int r = 0; r < MR; ++r) s[r] = _mm256_mul_ps(_mm256_load_ps(rows.d[r] + g), e);
  auto step = [&](int q, __m256(&acc)[MR]) {
    const __m256i idx =
        _mm256_setr_epi32(2 * q, 2 * q, 2 * q, 2 * q, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1);
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qg + q * 32));
    Step<MR>(w, table, g + 2 * q, idx, s, rows, acc);
  };
  // Unrolled so that each step's accumulator is known at compile time (registers, not a
  // selected array in memory).
  step(0, acc0);
  if (steps > 1) step(1, acc1);
  if (steps > 2) step(2, acc0);
  if (steps > 3) step(3, acc1);
}

// y[r·ldy] = row i + r of p (r < MR) · one W row (qj, ej).
struct Tile {
  template <int MR>
  static constexpr int kWRows = 1;

  template <int MR, int NR>
  static void Run(const Q8Panel& p, int64_t i, const uint8_t* qj, const uint8_t* ej, float* y,
                  int64_t ldy) {
    static_assert(NR == 1);
    const int64_t nb = p.nb();
    const Q8Rows<MR> rows(p, i);
    __m256 acc0[MR], acc1[MR];
    for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int64_t g = 0;
    for (; g + 8 <= nb; g += 8) {
      Group<MR>(qj + g * 16, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(ej + g)), g, 4, rows,
                acc0, acc1);
    }
    if (g < nb) {  // 1..7 blocks left: the same steps over a zero-padded copy
      const int left = static_cast<int>(nb - g);
      alignas(32) uint8_t qt[8 * 16] = {};
      alignas(16) uint8_t et[16] = {};
      std::memcpy(qt, qj + g * 16, left * 16);
      std::memcpy(et, ej + g, left);
      Group<MR>(qt, _mm_load_si128(reinterpret_cast<const __m128i*>(et)), g, (left + 1) / 2, rows,
                acc0, acc1);
    }
    for (int r = 0; r < MR; ++r) y[r * ldy] = HorizontalSum(_mm256_add_ps(acc0[r], acc1[r]));
  }
};

}  // namespace

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t) {
  TiledGemmMxfp4<Tile>(x, m, wq, we, y, ldy, n, k, t);
}

}  // namespace mx::avx2
