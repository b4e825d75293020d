// The attention and indexer kernels at the AVX-512 level: attention_simd.inc over 16-lane
// vectors (masked loads and stores for tails), 4 query rows per register tile.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention_kernels.h"
#include "kernels/exp_avx512.h"

namespace mx::avx512 {

namespace {

struct V {
  using Reg = __m512;
  using Lanes = __mmask16;
  static constexpr int kW = 16;
  static constexpr int kRows = 4;          // 16 score / 16 value accumulators of 32 registers
  static constexpr int kIndexerHeads = 8;  // 8 heads × 2 panels accumulators
  static __mmask16 M(int cnt) { return static_cast<__mmask16>((1u << cnt) - 1u); }
  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Set1(float x) { return _mm512_set1_ps(x); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg LoadN(const float* p, int cnt) { return _mm512_maskz_loadu_ps(M(cnt), p); }
  static Reg Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Reg Load(const uint16_t* p) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Reg LoadN(const uint16_t* p, int cnt) {
    return Widen(_mm256_maskz_loadu_epi16(M(cnt), p));
  }
  static void Store(float* p, Reg x) { _mm512_storeu_ps(p, x); }
  static void StoreN(float* p, Reg x, int cnt) { _mm512_mask_storeu_ps(p, M(cnt), x); }
  static Reg Mask(Reg x, int cnt) { return _mm512_maskz_mov_ps(M(cnt), x); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg Sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static float ReduceAdd(Reg x) { return _mm512_reduce_add_ps(x); }
  static float ReduceMax(Reg x) { return _mm512_reduce_max_ps(x); }
  // e^x as ops_avx512.cpp (Cephes degree 6, vscalefps); x ≤ 0 here.
  static Reg Exp(Reg x) { return ExpAvx512(x); }
  static Lanes BitsMask(uint32_t bits) { return static_cast<Lanes>(bits); }
  static Reg Select(Lanes m, Reg a, Reg b) { return _mm512_mask_blend_ps(m, b, a); }
};

}  // namespace

#include "kernels/attention_simd.inc"

}  // namespace mx::avx512
