// Activations as bf16 pairs for the vdpbf16ps GEMMs (bf16_packed_avx512.cpp, fp8_avx512.cpp),
// and the helpers the other vdpbf16ps kernels share (kernels_avx512.cpp):
// each fp32 row split once per call into P = 3 bf16 parts whose sum is the value exactly
// (hi = bf16(x), mid = bf16(x − hi), lo = the rest) or P = 1 (x rounded once), stored as rows of
// `row_pairs` pairs (zeros past k). Included only by AVX-512 BF16 translation units.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <vector>

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector, which
// -W(maybe-)uninitialized reports at every inlined use (the including units ignore it too).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

// bf16 values widened to fp32 (exact).
[[gnu::always_inline]] inline __m512 WidenBf16(__m256bh v) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<const __m256i&>(v)), 16));
}

// v as three bf16 parts whose sum is v exactly: hi = bf16(v), mid = bf16(v − hi), lo = the rest
// (each remainder is exact in fp32).
struct Bf16Parts {
  __m256bh hi, mid, lo;
};
[[gnu::always_inline]] inline Bf16Parts SplitBf16(__m512 v) {
  Bf16Parts p;
  p.hi = _mm512_cvtneps_pbh(v);
  const __m512 r1 = _mm512_sub_ps(v, WidenBf16(p.hi));
  p.mid = _mm512_cvtneps_pbh(r1);
  p.lo = _mm512_cvtneps_pbh(_mm512_sub_ps(r1, WidenBf16(p.mid)));
  return p;
}

// Lane i of the result = the sum of a[i]'s 16 lanes, by one fixed tree: pairs within each
// 128-bit lane, then across the four 128-bit lanes. Each output's sum involves only its own
// accumulator, so passing an accumulator in several slots (short tiles) gives it the same
// value as in a full tile.
inline __m512 Reduce16(const __m512 (&a)[16]) {
  __m512 u[4];
  for (int g = 0; g < 4; ++g) {
    const __m512 p0 = _mm512_add_ps(_mm512_unpacklo_ps(a[4 * g], a[4 * g + 1]),
                                    _mm512_unpackhi_ps(a[4 * g], a[4 * g + 1]));
    const __m512 p1 = _mm512_add_ps(_mm512_unpacklo_ps(a[4 * g + 2], a[4 * g + 3]),
                                    _mm512_unpackhi_ps(a[4 * g + 2], a[4 * g + 3]));
    const __m512d d0 = _mm512_castps_pd(p0), d1 = _mm512_castps_pd(p1);
    u[g] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
  }
  // u[g]: in each 128-bit lane L, partial sums (over that lane) of a[4g..4g+3].
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

template <int P>
struct PairsX {
  const uint32_t* part[3];  // hi, mid, lo
  int64_t kp;               // pairs per row
};

// REQUIRES: 2·row_pairs >= k.
template <int P>
PairsX<P> SplitPairs(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t row_pairs) {
  thread_local std::vector<uint16_t> buf;
  const int64_t row = 2 * row_pairs, per = m * row + 32;
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
        const Bf16Parts parts = SplitBf16(v);
        _mm256_mask_storeu_epi16(hi + per + c, out, reinterpret_cast<const __m256i&>(parts.mid));
        _mm256_mask_storeu_epi16(hi + 2 * per + c, out, reinterpret_cast<const __m256i&>(parts.lo));
      }
    }
  }
  PairsX<P> s;
  for (int p = 0; p < 3; ++p) {
    s.part[p] = reinterpret_cast<const uint32_t*>(buf.data() + (p < P ? p : 0) * per);
  }
  s.kp = row_pairs;
  return s;
}

inline __m512bh Bcast(const uint32_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int32_t>(*p)));
}

// acc[c] += pair o of xs · w[c] for c < NR: one vdpbf16ps per part, smallest part first.
template <int P, int NR>
inline void DotPair(__m512 (&acc)[NR], const PairsX<P>& xs, int64_t o, const __m512bh (&w)[NR]) {
  if constexpr (P == 3) {
    const __m512bh xl = Bcast(xs.part[2] + o), xm = Bcast(xs.part[1] + o);
    const __m512bh xh = Bcast(xs.part[0] + o);
    for (int c = 0; c < NR; ++c) {
      acc[c] = _mm512_dpbf16_ps(acc[c], xl, w[c]);
      acc[c] = _mm512_dpbf16_ps(acc[c], xm, w[c]);
      acc[c] = _mm512_dpbf16_ps(acc[c], xh, w[c]);
    }
  } else {
    const __m512bh xh = Bcast(xs.part[0] + o);
    for (int c = 0; c < NR; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], xh, w[c]);
  }
}

}  // namespace mx::avx512
