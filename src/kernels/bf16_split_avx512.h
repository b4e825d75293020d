// Activations as bf16 pairs for the vdpbf16ps GEMMs (bf16_packed_avx512.cpp, fp8_avx512.cpp):
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
