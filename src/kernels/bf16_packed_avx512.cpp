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

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector
// (`__m512i __Y = __Y;`), which -W(maybe-)uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

// How far ahead each group's stream is prefetched (bytes): decode reads W once from memory.
constexpr int64_t kAhead = 1024;

inline void Store(float* y, __m512 v, int lo, int hi) {
  if (lo == 0 && hi == kBf16RowGroup) {
    _mm512_storeu_ps(y, v);
  } else {  // lanes lo..hi-1 of a group the slice cuts, packed to y
    _mm512_mask_compressstoreu_ps(y, static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1)),
                                  v);
  }
}

template <int MR, int NR>
inline void StoreAll(const __m512 (&acc)[MR][NR], float* y, int64_t ldy, int lo, int hi) {
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) Store(y + r * ldy + c * kBf16RowGroup, acc[r][c], lo, hi);
  }
}

// ---- Dot: activations as bf16 pairs (uint32), rows of kp pairs.
template <int P>
struct PairsX {
  const uint32_t* part[3];  // hi, mid, lo
  int64_t kp;
};

template <int P>
PairsX<P> SplitPairs(const float* x, int64_t ldx, int64_t m, int64_t k) {
  thread_local std::vector<uint16_t> buf;
  const int64_t kp = Bf16Pairs(k), row = 2 * kp, per = m * row + 32;
  if (buf.size() < static_cast<size_t>(P * per)) buf.resize(P * per);
  for (int64_t i = 0; i < m; ++i) {
    uint16_t* hi = buf.data() + i * row;
    for (int64_t c = 0; c < row; c += 16) {
      const int64_t left = k - c;
      const __mmask16 mk = left >= 16  ? __mmask16(0xffff)
                           : left <= 0 ? __mmask16(0)
                                       : __mmask16((1u << left) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(mk, x + i * ldx + c);  // zeros past k
      const __m256bh h = _mm512_cvtneps_pbh(v);
      const __mmask16 out = static_cast<__mmask16>(row - c >= 16 ? 0xffff : (1u << (row - c)) - 1);
      _mm256_mask_storeu_epi16(hi + c, out, reinterpret_cast<const __m256i&>(h));
      if constexpr (P == 3) {
        const auto widen = [](__m256bh b) {
          return _mm512_castsi512_ps(
              _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<const __m256i&>(b)), 16));
        };
        const __m512 r1 = _mm512_sub_ps(v, widen(h));
        const __m256bh md = _mm512_cvtneps_pbh(r1);
        const __m256bh lo = _mm512_cvtneps_pbh(_mm512_sub_ps(r1, widen(md)));
        _mm256_mask_storeu_epi16(hi + per + c, out, reinterpret_cast<const __m256i&>(md));
        _mm256_mask_storeu_epi16(hi + 2 * per + c, out, reinterpret_cast<const __m256i&>(lo));
      }
    }
  }
  PairsX<P> s;
  for (int p = 0; p < 3; ++p) {
    s.part[p] = reinterpret_cast<const uint32_t*>(buf.data() + (p < P ? p : 0) * per);
  }
  s.kp = kp;
  return s;
}

inline __m512bh Bcast(const uint32_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int32_t>(*p)));
}

template <int P>
struct DotTile {
  template <int MR>
  static constexpr int kGroups = MR >= 8   ? 3
                                 : MR == 4 ? 4
                                           : 8;

  template <int MR, int NR>
  static void Run(const PairsX<P>& xs, int64_t i, const uint16_t* wg, int64_t kp, float* y,
                  int64_t ldy, int lo, int hi) {
    const int64_t stride = kp * 2 * kBf16RowGroup;
    __m512 acc[MR][NR];
    for (int r = 0; r < MR; ++r) {
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kp; ++p) {
      __m512bh w[NR];
      for (int c = 0; c < NR; ++c) {
        const uint16_t* wc = wg + c * stride + p * 2 * kBf16RowGroup;
        _mm_prefetch(reinterpret_cast<const char*>(wc) + kAhead, _MM_HINT_T0);
        w[c] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wc));
      }
      for (int r = 0; r < MR; ++r) {
        const int64_t o = (i + r) * xs.kp + p;
        if constexpr (P == 3) {
          const __m512bh xl = Bcast(xs.part[2] + o), xm = Bcast(xs.part[1] + o);
          const __m512bh xh = Bcast(xs.part[0] + o);
          for (int c = 0; c < NR; ++c) {
            acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xl, w[c]);
            acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xm, w[c]);
            acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xh, w[c]);
          }
        } else {
          const __m512bh xh = Bcast(xs.part[0] + o);
          for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xh, w[c]);
        }
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
  static void Run(const PackedBf16FloatX& xs, int64_t i, const uint16_t* wg, int64_t kp, float* y,
                  int64_t ldy, int lo, int hi) {
    const int64_t stride = kp * 2 * kBf16RowGroup;
    const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
    __m512 acc[MR][NR];
    for (int r = 0; r < MR; ++r) {
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kp; ++p) {
      __m512 we[NR], wo[NR];
      for (int c = 0; c < NR; ++c) {
        const uint16_t* wc = wg + c * stride + p * 2 * kBf16RowGroup;
        _mm_prefetch(reinterpret_cast<const char*>(wc) + kAhead, _MM_HINT_T0);
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
  GroupedGemmBf16<DotTile<3>>(SplitPairs<3>(x, ldx, m, k), m, wp, k, r0, r1, y, ldy, t);
}

void GemmBf16PackedDotX16(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                          int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  if (m <= 0 || r1 <= r0) return;
  GroupedGemmBf16<DotTile<1>>(SplitPairs<1>(x, ldx, m, k), m, wp, k, r0, r1, y, ldy, t);
}

}  // namespace mx::avx512
