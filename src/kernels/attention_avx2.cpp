// The attention and indexer kernels at the AVX2 level: attention_simd.inc over 8-lane vectors
// (maskload / maskstore for tails), 2 query rows per register tile (16 registers).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention_kernels.h"
#include "kernels/exp_avx2.h"

namespace mx::avx2 {

namespace {

struct V {
  using Reg = __m256;
  using Lanes = __m256;  // all-ones lanes
  static constexpr int kW = 8;
  static constexpr int kRows = 2;          // 8 score / 8 value accumulators of 16 registers
  static constexpr int kIndexerHeads = 2;  // 2 heads × 2 panels × 2 vectors accumulators
  static __m256i M(int cnt) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Set1(float x) { return _mm256_set1_ps(x); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg LoadN(const float* p, int cnt) { return _mm256_maskload_ps(p, M(cnt)); }
  static Reg Widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static Reg Load(const uint16_t* p) {
    return Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Reg LoadN(const uint16_t* p, int cnt) {  // no 16-bit masked load in AVX2: a copy
    alignas(16) uint16_t t[8] = {};
    std::memcpy(t, p, static_cast<size_t>(cnt) * sizeof(uint16_t));
    return Load(t);
  }
  static void Store(float* p, Reg x) { _mm256_storeu_ps(p, x); }
  static void StoreN(float* p, Reg x, int cnt) { _mm256_maskstore_ps(p, M(cnt), x); }
  static Reg Mask(Reg x, int cnt) { return _mm256_and_ps(x, _mm256_castsi256_ps(M(cnt))); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg Add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg Sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static float ReduceAdd(Reg x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float ReduceMax(Reg x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // e^x as kernels_avx2.cpp (Cephes degree 6; below -87.3 → 0).
  static Reg Exp(Reg x) { return ExpAvx2(x); }
  static Lanes BitsMask(uint32_t bits) {
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i b = _mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(bits)), lane);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, lane));
  }
  static Reg Select(Lanes m, Reg a, Reg b) { return _mm256_blendv_ps(b, a, m); }
};

}  // namespace

#include "kernels/attention_simd.inc"

}  // namespace mx::avx2
