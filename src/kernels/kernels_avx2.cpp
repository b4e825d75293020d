// AVX2 + FMA kernels (see kernels_avx2.h). Error budget vs ref: same fp32 products, different
// summation order (8 lanes, then a horizontal sum): kernels_test.cpp's kGemmTol; exp within
// 2 ulp of std::exp (kExpRelTol).
#include "kernels/kernels_avx2.h"
#include "kernels/exp_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/kernels_ref.h"

namespace mx {

namespace {

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// 8 bf16 → 8 fp32: widen to 32 bits and shift into the high half.
inline __m256 LoadBf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float Bf16Scalar(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

inline __m256 LoadW(const uint16_t* p) { return LoadBf16(p); }
inline __m256 LoadW(const float* p) { return _mm256_loadu_ps(p); }
inline float ScalarW(uint16_t h) { return Bf16Scalar(h); }
inline float ScalarW(float f) { return f; }

// y[MR rows, NR columns] = x[MR, k] · w[NR, k]^T: MR·NR independent accumulators (the FMA
// latency is hidden) and each weight vector is loaded and widened once for all MR rows.
template <int MR, int NR, typename W>
inline void MicroKernel(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy,
                        int64_t k) {
  const int64_t k8 = k & ~int64_t{7};
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t t = 0; t < k8; t += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = LoadW(w + j * ldw + t);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + t);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = HorizontalSum(acc[i][j]);
      for (int64_t t = k8; t < k; ++t) s += x[i * ldx + t] * ScalarW(w[j * ldw + t]);
      y[i * ldy + j] = s;
    }
  }
}

// One column block: rows in tiles of MR (MR×NR micro-tiles, the leftover columns MR×1), the
// rows left over from MR one at a time (1×8 tiles).
template <int MR, int NR, typename W>
void RowTile(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy, int64_t n,
             int64_t k) {
  int64_t j = 0;
  for (; j + NR <= n; j += NR) MicroKernel<MR, NR>(x, ldx, w + j * ldw, ldw, y + j, ldy, k);
  for (; j < n; ++j) MicroKernel<MR, 1>(x, ldx, w + j * ldw, ldw, y + j, ldy, k);
}

template <typename W>
void GemmBlock(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy,
               int64_t m, int64_t n, int64_t k, int mr) {
  int64_t i = 0;
  if (mr >= 4) {
    for (; i + 4 <= m; i += 4) RowTile<4, 2>(x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, n, k);
  } else if (mr == 2) {
    for (; i + 2 <= m; i += 2) RowTile<2, 4>(x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, n, k);
  }
  for (; i < m; ++i) RowTile<1, 8>(x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, n, k);
}

// Default tiling {mr 4, one block}: 4×2 tiles over all of W, then the leftover rows 1×8.
template <typename W>
void Gemm(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy, int64_t m,
          int64_t n, int64_t k, GemmTiling t) {
  const int mr = t.mr == 0 ? 4 : t.mr;
  const int64_t nb = t.nb > 0 ? t.nb : n;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    GemmBlock(x, ldx, w + j0 * ldw, ldw, y + j0, ldy, m, std::min(nb, n - j0), k, mr);
  }
}

inline float Dot(const float* a, const float* b, int64_t n) {
  const int64_t n8 = n & ~int64_t{7};
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n8; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i < n8; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline __m256 Exp(__m256 x) { return ExpAvx2(x); }

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

}  // namespace

namespace avx2 {

void GemmBf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
              int64_t m, int64_t n, int64_t k, GemmTiling t) {
  Gemm(x, ldx, w, ldw, y, ldy, m, n, k, t);
}

void GemmF32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmTiling t) {
  Gemm(x, ldx, w, ldw, y, ldy, m, n, k, t);
}

void RmsNorm(const float* x, const float* w, float eps, int64_t n, float* y) {
  const int64_t n8 = n & ~int64_t{7};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float ss = HorizontalSum(acc);
  for (int64_t i = n8; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), v));
  }
  for (int64_t i = n8; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

// The lanes past a whole number of vectors go through the scalar formula (std::exp).
void Softmax(float* x, int64_t n) {
  const int64_t n8 = n & ~int64_t{7};
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n8; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  float mx = HorizontalMax(vm);
  for (int64_t i = n8; i < n; ++i) mx = std::max(mx, x[i]);
  const __m256 vmax = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = HorizontalSum(vsum);
  for (int64_t i = n8; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t i = 0; i < n8; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (int64_t i = n8; i < n; ++i) x[i] *= inv;
}

// Every element through the same vector formula (the tail by masked loads and stores), so a
// column slice of a row gives the same bits as the whole row (the MoE splits SwiGLU so).
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const auto silu_up = [&](__m256 g, __m256 u) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, silu_up(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(out + i, mk,
                        silu_up(_mm256_maskload_ps(gate + i, mk), _mm256_maskload_ps(up + i, mk)));
  }
}

// Interleaved: 4 pairs per vector, cos / sin duplicated into both lanes of a pair, the pair
// swapped, vfmaddsub (a·c − b·s even, b·c + a·s odd). NeoX: 8 of each half at a time. Pairs
// past the last whole vector: the ref formula.
void Rope(float* x, int64_t d, const float* cos, const float* sin, bool interleave) {
  const int64_t half = d / 2;
  int64_t j = 0;
  if (interleave) {
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    for (; j + 4 <= half; j += 4) {
      const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + j)), dup);
      const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + j)), dup);
      const __m256 v = _mm256_loadu_ps(x + 2 * j);
      const __m256 swapped = _mm256_permute_ps(v, 0xB1);
      _mm256_storeu_ps(x + 2 * j, _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(swapped, s)));
    }
  } else {
    for (; j + 8 <= half; j += 8) {
      const __m256 c = _mm256_loadu_ps(cos + j), s = _mm256_loadu_ps(sin + j);
      const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + half);
      _mm256_storeu_ps(x + j, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
      _mm256_storeu_ps(x + j + half, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
    }
  }
  for (; j < half; ++j) {
    float* a = interleave ? &x[2 * j] : &x[j];
    float* b = interleave ? &x[2 * j + 1] : &x[j + half];
    const float x0 = *a, x1 = *b;
    *a = x0 * cos[j] - x1 * sin[j];
    *b = x0 * sin[j] + x1 * cos[j];
  }
}

// As the AVX-512 top-k: TopKHeap (kernels_ref.h) holds the k best, 8 later scores at a time
// are compared against its threshold, the rest one by one.
void TopK(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (k <= 0) return;
  TopKHeap heap(scores, k);
  int64_t i = k;
  for (; i + 8 <= n; i += 8) {
    unsigned gt = static_cast<unsigned>(_mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_loadu_ps(scores + i), _mm256_set1_ps(heap.threshold()), _CMP_GT_OQ)));
    for (; gt != 0; gt &= gt - 1) {
      const int64_t j = i + __builtin_ctz(gt);
      heap.Offer(scores[j], static_cast<int32_t>(j));
    }
  }
  for (; i < n; ++i) heap.Offer(scores[i], static_cast<int32_t>(i));
  heap.Write(out);
}

// Scores by vector dot products, softmax, then out += p_t · v[t] eight lanes at a time.
void Attend(const float* qa, const float* qb, int64_t da, int64_t db, const float* const* ka,
            const float* const* kb, const float* const* v, int64_t dv, int64_t n, float scale,
            float* scratch, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    scratch[t] = (Dot(qa, ka[t], da) + Dot(qb, kb[t], db)) * scale;
  }
  Softmax(scratch, n);
  const int64_t d8 = dv & ~int64_t{7};
  std::fill(out, out + dv, 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    const __m256 p = _mm256_set1_ps(scratch[t]);
    const float* vt = v[t];
    for (int64_t d = 0; d < d8; d += 8) {
      _mm256_storeu_ps(out + d,
                       _mm256_fmadd_ps(p, _mm256_loadu_ps(vt + d), _mm256_loadu_ps(out + d)));
    }
    for (int64_t d = d8; d < dv; ++d) out[d] += scratch[t] * vt[d];
  }
}

}  // namespace avx2

}  // namespace mx
