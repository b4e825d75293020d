// AVX-512 BF16 GEMM over packed FP8 weights (fp8.h). A tile of MR activation rows × NR groups of
// 16 W rows keeps MR·NR block accumulators; per column quad it loads one 64-byte vector per
// group, whose vpunpck{l,h}bw (each byte doubled into a 16-bit lane) give the two pairs' codes,
// decoded to exact bf16 (value · 2^-8) by: an arithmetic shift and one ternary-logic op (sign,
// exponent + 112, mantissa), a vpermw from a table under the mask of the exponent-0 lanes (zero
// and the subnormals), and the sign again for those. Per activation row the pair is broadcast
// and vdpbf16ps adds the 16 rows' products (x in three exact parts smallest first, or rounded
// once: bf16_split_avx512.h). At the end of each 128-column block the block sums are scaled by
// the rows' scales into fp32 accumulators kept in memory (once per 64 pairs).
#include <immintrin.h>

#include <algorithm>

#include "kernels/bf16_split_avx512.h"
#include "kernels/fp8.h"
#include "kernels/fp8_tiled.h"
#include "kernels/weight_prefetch.h"

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector, which
// -W(maybe-)uninitialized reports at every inlined use (as in mxfp4_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

struct Decoder {
  __m512i table, field, bias, expo, sign;

  Decoder() {
    alignas(64) uint16_t t[32] = {};
    for (int c = 0; c < 8; ++c) t[c] = Fp8CodeToBf16Scaled(static_cast<uint8_t>(c));
    table = _mm512_load_si512(t);
    field = _mm512_set1_epi16(static_cast<int16_t>(0x87F0));
    bias = _mm512_set1_epi16(0x3800);
    expo = _mm512_set1_epi16(0x7800);
    sign = _mm512_set1_epi16(static_cast<int16_t>(0x8000));
  }

  // w: code b in both bytes of each 16-bit lane.
  __m512bh operator()(__m512i w) const {
    // (w >> 4) & 0x87F0 | 0x3800: sign, 0111 EEEE, MMM, 0000.
    __m512i t = _mm512_ternarylogic_epi32(_mm512_srai_epi16(w, 4), field, bias, 0xEA);
    const __mmask32 sub = _mm512_testn_epi16_mask(w, expo);  // E = 0: zero, subnormals
    t = _mm512_mask_permutexvar_epi16(t, sub, w, table);     // index: the low 5 bits = M
    return reinterpret_cast<__m512bh>(_mm512_ternarylogic_epi32(t, w, sign, 0xF8));  // | sign
  }
};

template <int P>
struct DotTile {
  // A lone activation row takes eight groups: eight independent vdpbf16ps chains (three
  // dependent steps per pair with P = 3) to cover the latency; wider tiles have more rows.
  template <int MR>
  static constexpr int kGroups = MR == 1   ? 8
                                 : MR >= 8 ? 2
                                           : 4;

  template <int MR, int NR>
  static void Run(const PairsX<P>& xs, int64_t i, const uint8_t* wg, const float* sg, int64_t k,
                  float* y, int64_t ldy, int lo, int hi) {
    static const Decoder dec;
    const int64_t nq = Fp8Quads(k), kb = Fp8ScaleCols(k);
    const int64_t code_stride = nq * kFp8QuadBytes, scale_stride = kb * kFp8RowGroup;
    alignas(64) float acc[MR][NR][kFp8RowGroup] = {};
    for (int64_t b = 0; b < kb; ++b) {
      __m512 bs[MR][NR];
      for (int r = 0; r < MR; ++r) {
        for (int c = 0; c < NR; ++c) bs[r][c] = _mm512_setzero_ps();
      }
      const int64_t q_end = std::min(nq, (b + 1) * (kFp8Block / 4));
      for (int64_t q = b * (kFp8Block / 4); q < q_end; ++q) {
        __m512i v[NR];
        for (int c = 0; c < NR; ++c) {
          const uint8_t* wc = wg + c * code_stride + q * kFp8QuadBytes;
          PrefetchWeights<MR == 1>(wc);
          v[c] = _mm512_loadu_si512(wc);
        }
        for (int h = 0; h < 2; ++h) {
          __m512bh w[NR];
          for (int c = 0; c < NR; ++c) {
            w[c] =
                dec(h == 0 ? _mm512_unpacklo_epi8(v[c], v[c]) : _mm512_unpackhi_epi8(v[c], v[c]));
          }
          const int64_t p = 2 * q + h;
          for (int r = 0; r < MR; ++r) {
            const int64_t o = (i + r) * xs.kp + p;
            DotPair<P, NR>(bs[r], xs, o, w);
          }
        }
      }
      for (int c = 0; c < NR; ++c) {
        const __m512 sv = _mm512_loadu_ps(sg + c * scale_stride + b * kFp8RowGroup);
        for (int r = 0; r < MR; ++r) {
          _mm512_store_ps(acc[r][c], _mm512_fmadd_ps(bs[r][c], sv, _mm512_load_ps(acc[r][c])));
        }
      }
    }
    for (int r = 0; r < MR; ++r) {
      for (int c = 0; c < NR; ++c) {
        std::copy(acc[r][c] + lo, acc[r][c] + hi, y + r * ldy + c * kFp8RowGroup);
      }
    }
  }
};

}  // namespace

void GemmFp8Dot(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  GroupedGemmFp8<DotTile<3>>(SplitPairs<3>(x, ldx, m, k, 2 * Fp8Quads(k)), m, wp, sp, k, r0, r1, y,
                             ldy, t);
}

void GemmFp8DotX16(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                   int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  GroupedGemmFp8<DotTile<1>>(SplitPairs<1>(x, ldx, m, k, 2 * Fp8Quads(k)), m, wp, sp, k, r0, r1, y,
                             ldy, t);
}

}  // namespace mx::avx512
