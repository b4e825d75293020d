// AVX-512 GEMMs over packed bf16 weights (bf16_packed.h). A tile of MR activation rows × NR
// groups of 16 W rows keeps MR·NR accumulators; per pair of k values it loads one 64-byte vector
// per group (16 rows × 2 elements) and, per activation row, broadcasts that row's pair.
// - Dot (AVX512_BF16): vdpbf16ps multiplies the bf16 pairs exactly and adds them into the
//   lanes. kFp32 activations are split once per call into three bf16 parts whose sum is the
//   fp32 value exactly (hi = bf16(x), mid = bf16(x − hi), lo = the rest), dotted smallest part
//   first; kBf16 (X16) rounds x once (hi alone). The instruction flushes denormal inputs.
// - Fma (AVX-512 F): each pair widened to fp32 (even element: the low half shifted up; odd:
//   the high half masked) and two FMAs, even element first — the ref's arithmetic exactly.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/bf16_packed.h"
#include "kernels/bf16_packed_tiled.h"
#include "kernels/bf16_split_avx512.h"
#include "kernels/weight_prefetch.h"

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector
// (`__m512i __Y = __Y;`), which -W(maybe-)uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

inline void Store(float* y, __m512 v, int lo, int hi) {
  if (lo == 0 && hi == kBf16RowGroup) {
    _mm512_storeu_ps(y, v);
  } else {  // lanes lo..hi-1 of a group the slice cuts, packed to y
    _mm512_mask_compressstoreu_ps(y, static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1)),
                                  v);
  }
}

// The accumulators' start: zero at the first K block, else what the previous block stored.
inline __m512 Start(const float* y, int64_t p0, int lo, int hi) {
  if (p0 == 0) return _mm512_setzero_ps();
  if (lo == 0 && hi == kBf16RowGroup) return _mm512_loadu_ps(y);
  return _mm512_maskz_expandloadu_ps(static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1)),
                                     y);
}

template <int MR, int NR>
inline void StartAll(__m512 (&acc)[MR][NR], const float* y, int64_t ldy, int64_t p0, int lo,
                     int hi) {
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) acc[r][c] = Start(y + r * ldy + c * kBf16RowGroup, p0, lo, hi);
  }
}

template <int MR, int NR>
inline void StoreAll(const __m512 (&acc)[MR][NR], float* y, int64_t ldy, int lo, int hi) {
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) Store(y + r * ldy + c * kBf16RowGroup, acc[r][c], lo, hi);
  }
}

// ---- Dot: activations as bf16 pairs (bf16_split_avx512.h), rows of kp pairs.

template <int P>
struct DotTile {
  template <int MR>
  static constexpr int kGroups = MR >= 8   ? 3
                                 : MR == 4 ? 4
                                           : 8;

  template <int MR, int NR>
  static void Run(const PairsX<P>& xs, int64_t i, const uint16_t* wg, int64_t kp, int64_t p0,
                  int64_t p1, float* y, int64_t ldy, int lo, int hi) {
    const int64_t stride = kp * 2 * kBf16RowGroup;
    __m512 acc[MR][NR];
    StartAll<MR, NR>(acc, y, ldy, p0, lo, hi);
    for (int64_t p = p0; p < p1; ++p) {
      __m512bh w[NR];
      for (int c = 0; c < NR; ++c) {
        const uint16_t* wc = wg + c * stride + p * 2 * kBf16RowGroup;
        PrefetchWeights<MR == 1>(wc);
        w[c] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wc));
      }
      for (int r = 0; r < MR; ++r) {
        const int64_t o = (i + r) * xs.kp + p;
        DotPair<P, NR>(acc[r], xs, o, w);
      }
    }
    StoreAll<MR, NR>(acc, y, ldy, lo, hi);
  }
};

struct FmaTile {
  template <int MR>
  static constexpr int kGroups = MR >= 8   ? 2
                                 : MR == 4 ? 3
                                           : 6;

  template <int MR, int NR>
  static void Run(const PackedBf16FloatX& xs, int64_t i, const uint16_t* wg, int64_t kp, int64_t p0,
                  int64_t p1, float* y, int64_t ldy, int lo, int hi) {
    const int64_t stride = kp * 2 * kBf16RowGroup;
    const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
    __m512 acc[MR][NR];
    StartAll<MR, NR>(acc, y, ldy, p0, lo, hi);
    for (int64_t p = p0; p < p1; ++p) {
      __m512 we[NR], wo[NR];
      for (int c = 0; c < NR; ++c) {
        const uint16_t* wc = wg + c * stride + p * 2 * kBf16RowGroup;
        PrefetchWeights<MR == 1>(wc);
        const __m512i v = _mm512_loadu_si512(wc);
        we[c] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        wo[c] = _mm512_castsi512_ps(_mm512_and_si512(v, high));
      }
      const bool odd = 2 * p + 1 < xs.k;  // the padding column pairs with x = 0
      for (int r = 0; r < MR; ++r) {
        const float* xr = xs.x + (i + r) * xs.ldx + 2 * p;
        const __m512 xe = _mm512_set1_ps(xr[0]);
        const __m512 xo = _mm512_set1_ps(odd ? xr[1] : 0.0f);
        for (int c = 0; c < NR; ++c) {
          acc[r][c] = _mm512_fmadd_ps(xe, we[c], acc[r][c]);
          acc[r][c] = _mm512_fmadd_ps(xo, wo[c], acc[r][c]);
        }
      }
    }
    StoreAll<MR, NR>(acc, y, ldy, lo, hi);
  }
};

}  // namespace

void GemmBf16PackedFma(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                       int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  GroupedGemmBf16<FmaTile>(PackedBf16FloatX{x, ldx, k}, m, wp, k, r0, r1, y, ldy, t);
}

void GemmBf16PackedDot(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                       int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  GroupedGemmBf16<DotTile<3>>(SplitPairs<3>(x, ldx, m, k, Bf16Pairs(k)), m, wp, k, r0, r1, y, ldy,
                              t);
}

void GemmBf16PackedDotX16(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                          int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  GroupedGemmBf16<DotTile<1>>(SplitPairs<1>(x, ldx, m, k, Bf16Pairs(k)), m, wp, k, r0, r1, y, ldy,
                              t);
}

}  // namespace mx::avx512
