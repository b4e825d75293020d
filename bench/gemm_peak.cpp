// The machine's dot-product ceilings for gemm_bench: register-only loops of vdpbf16ps (bf16
// pairs, 2 FLOP each) and vpdpbusd (int8 quads, 2 OP each) on 512-bit vectors, with enough
// independent accumulators to cover the instructions' latency. Compiled with the AVX-512 BF16 /
// VNNI flags (bench/CMakeLists.txt); call only where the CPU has them. Declared in dot_peak.h
// (not included here: its inline code must not be compiled with these flags).
#include <immintrin.h>

#include <cstdint>

namespace mx::bench {

// FLOPs one thread performed in `iters` iterations of 12 independent vdpbf16ps.
double Bf16DotLoop(int64_t iters) {
  // Distinct starting values, so the compiler cannot merge the chains.
  __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2),
         a3 = _mm512_set1_ps(3), a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5),
         a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7), a8 = _mm512_set1_ps(8),
         a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f80));  // 1.0
  const __m512bh y = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3c00));  // 2^-7
  for (int64_t i = 0; i < iters; ++i) {
#define MX_DP(a) a = _mm512_dpbf16_ps(a, x, y)
    MX_DP(a0), MX_DP(a1), MX_DP(a2), MX_DP(a3), MX_DP(a4), MX_DP(a5);
    MX_DP(a6), MX_DP(a7), MX_DP(a8), MX_DP(a9), MX_DP(a10), MX_DP(a11);
#undef MX_DP
  }
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                    _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iters) * 12 * 32 * 2;
}

// OPs one thread performed in `iters` iterations of 12 independent vpdpbusd.
double Int8DotLoop(int64_t iters) {
  __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2),
          a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5),
          a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8),
          a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
  const __m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(2);
  for (int64_t i = 0; i < iters; ++i) {
#define MX_DP(a) a = _mm512_dpbusd_epi32(a, x, y)
    MX_DP(a0), MX_DP(a1), MX_DP(a2), MX_DP(a3), MX_DP(a4), MX_DP(a5);
    MX_DP(a6), MX_DP(a7), MX_DP(a8), MX_DP(a9), MX_DP(a10), MX_DP(a11);
#undef MX_DP
  }
  const __m512i s = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                       _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))),
      _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
  volatile int sink = _mm512_reduce_add_epi32(s);
  (void)sink;
  return static_cast<double>(iters) * 12 * 64 * 2;
}

}  // namespace mx::bench
