// e^x on 8 fp32 lanes for the AVX2 units (kernels_avx2.cpp, attention_avx2.cpp); include only
// from translation units compiled with the AVX2/FMA flags (always_inline: no out-of-line copy
// can be picked by another unit).
#pragma once

#include <immintrin.h>

namespace mx {

// e^x for 8 lanes: x = n·ln2 + r, e^r by the Cephes degree-6 polynomial (≤ 2 ulp), 2^n built
// in the exponent field. x is clamped to [-87.3, 88.3] (n stays a normal exponent) and lanes
// below -87.3 give 0, as e^x underflows there; -inf → 0, NaN stays NaN (min/max return their
// second operand when one is NaN, and x is passed second).
[[gnu::always_inline]] inline __m256 ExpAvx2(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_set1_ps(88.3f), x);
  x = _mm256_max_ps(lo, x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

}  // namespace mx
