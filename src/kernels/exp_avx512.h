// e^x on 16 fp32 lanes for the AVX-512 units (ops_avx512.cpp, attention_avx512.cpp); include
// only from translation units compiled with the AVX-512 flags (always_inline: no out-of-line
// copy can be picked by another unit).
#pragma once

#include <immintrin.h>

namespace mx {

// e^x for 16 lanes: x = n·ln2 + r with |r| ≤ ln2/2, e^r by the Cephes degree-6 polynomial
// (≤ 2 ulp on that range), scaled by 2^n with vscalefps (which gives 0 below the denormals
// and +inf above the float range). -inf → 0; NaN stays NaN (max/min return their second
// operand when the first is NaN, so x is passed second).
[[gnu::always_inline]] inline __m512 ExpAvx512(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.7228f), x);
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

}  // namespace mx
