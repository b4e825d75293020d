// The AVX-512 level's non-MXFP4 entries (kernels_avx512.h): 16-lane fp32 GEMM (bf16 weights
// widened exactly, for CPUs without AVX512_BF16, and fp32 weights), RMSNorm, softmax and
// SwiGLU on a vector exp, RoPE in both pair layouts, a threshold-scan top-k and attention.
// Error budget vs ref: same fp32 products, other summation orders, and exp within 2 ulp of
// std::exp (kernels_test.cpp's named tolerances). Tails use masked loads, so every output of a
// GEMM is reduced the same way whatever the tile (the tilings are bit-identical).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/exp_avx512.h"
#include "kernels/kernels_avx512.h"
#include "kernels/kernels_ref.h"

namespace mx {

namespace {

inline __mmask16 TailMask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// 16 bf16 → 16 fp32 (exact): widen to 32 bits and shift into the high half.
inline __m512 LoadW(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 LoadW(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

inline __m512 Exp(__m512 x) { return ExpAvx512(x); }

// y[MR rows, NR columns] = x[MR, k] · w[NR, k]ᵀ: MR·NR accumulators, each weight vector loaded
// and widened once for all MR rows.
template <int MR, int NR, typename W>
inline void MicroKernel(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy,
                        int64_t k) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t t = 0; t < k; t += 16) {
    const __mmask16 mk = TailMask(k - t);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) {
      if constexpr (MR == 1) {  // decode streams W: 512 bytes ahead, as kernels_avx512.cpp
        _mm_prefetch(reinterpret_cast<const char*>(w + j * ldw + t) + 512, _MM_HINT_T0);
      }
      wv[j] = LoadW(w + j * ldw + t, mk);
    }
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mk, x + i * ldx + t);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

template <int MR, int NR, typename W>
void RowTile(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy, int64_t n,
             int64_t k) {
  int64_t j = 0;
  for (; j + NR <= n; j += NR) MicroKernel<MR, NR>(x, ldx, w + j * ldw, ldw, y + j, ldy, k);
  for (; j < n; ++j) MicroKernel<MR, 1>(x, ldx, w + j * ldw, ldw, y + j, ldy, k);
}

// Default tiling {mr 4, one block}; 4×4, 2×6 and 1×8 tiles (at most 24 of the 32 registers
// hold accumulators).
template <typename W>
void Gemm(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy, int64_t m,
          int64_t n, int64_t k, GemmTiling t) {
  const int mr = t.mr == 0 ? 4 : t.mr;
  const int64_t nb = t.nb > 0 ? t.nb : n;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t cols = std::min(nb, n - j0);
    const W* wb = w + j0 * ldw;
    float* yb = y + j0;
    int64_t i = 0;
    if (mr >= 4) {
      for (; i + 4 <= m; i += 4)
        RowTile<4, 4>(x + i * ldx, ldx, wb, ldw, yb + i * ldy, ldy, cols, k);
    } else if (mr == 2) {
      for (; i + 2 <= m; i += 2)
        RowTile<2, 6>(x + i * ldx, ldx, wb, ldw, yb + i * ldy, ldy, cols, k);
    }
    for (; i < m; ++i) RowTile<1, 8>(x + i * ldx, ldx, wb, ldw, yb + i * ldy, ldy, cols, k);
  }
}

inline float Dot(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 mk = TailMask(n - i);
    acc0 =
        _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, a + i), _mm512_maskz_loadu_ps(mk, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace

namespace avx512 {

void GemmBf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
              int64_t m, int64_t n, int64_t k, GemmTiling t) {
  Gemm(x, ldx, w, ldw, y, ldy, m, n, k, t);
}

void GemmF32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmTiling t) {
  Gemm(x, ldx, w, ldw, y, ldy, m, n, k, t);
}

void RmsNorm(const float* x, const float* w, float eps, int64_t n, float* y) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  const float ss = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(n) + eps));
  for (i = 0; i < n; i += 16) {  // y may alias x: each lane is read before it is written
    const __mmask16 mk = TailMask(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), inv);
    _mm512_mask_storeu_ps(y + i, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, w + i), v));
  }
}

void Softmax(float* x, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mx = ninf;
  for (int64_t i = 0; i < n; i += 16) {
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, TailMask(n - i), x + i));
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = TailMask(n - i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), vmax));
    _mm512_mask_storeu_ps(x + i, mk, e);
    sum = _mm512_mask_add_ps(sum, mk, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), inv));
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(mk, gate + i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, mk, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mk, up + i)));
  }
}

// Interleaved pairs: 8 pairs per vector; cos / sin duplicated into both lanes of a pair, the
// pair swapped, and vfmaddsub gives a·c − b·s in the even lane and b·c + a·s in the odd one.
// NeoX pairs (x[j], x[j + d/2]): 16 values of each half at a time.
void Rope(float* x, int64_t d, const float* cos, const float* sin, bool interleave) {
  const int64_t half = d / 2;
  if (interleave) {
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    int64_t j = 0;
    for (; j + 8 <= half; j += 8) {
      const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cos + j)));
      const __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(sin + j)));
      const __m512 v = _mm512_loadu_ps(x + 2 * j);
      const __m512 swapped = _mm512_permute_ps(v, 0xB1);
      _mm512_storeu_ps(x + 2 * j, _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(swapped, s)));
    }
    for (; j < half; j += 8) {
      const int64_t pairs = std::min<int64_t>(8, half - j);
      const __mmask16 m8 = TailMask(pairs), m16 = TailMask(2 * pairs);
      const __m512 c = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(m8, cos + j));
      const __m512 s = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(m8, sin + j));
      const __m512 v = _mm512_maskz_loadu_ps(m16, x + 2 * j);
      const __m512 swapped = _mm512_permute_ps(v, 0xB1);
      _mm512_mask_storeu_ps(x + 2 * j, m16, _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(swapped, s)));
    }
    return;
  }
  int64_t j = 0;
  for (; j + 16 <= half; j += 16) {
    const __m512 c = _mm512_loadu_ps(cos + j), s = _mm512_loadu_ps(sin + j);
    const __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + half);
    _mm512_storeu_ps(x + j, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
    _mm512_storeu_ps(x + j + half, _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c)));
  }
  for (; j < half; j += 16) {
    const __mmask16 mk = TailMask(half - j);
    const __m512 c = _mm512_maskz_loadu_ps(mk, cos + j), s = _mm512_maskz_loadu_ps(mk, sin + j);
    const __m512 a = _mm512_maskz_loadu_ps(mk, x + j);
    const __m512 b = _mm512_maskz_loadu_ps(mk, x + j + half);
    _mm512_mask_storeu_ps(x + j, mk, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
    _mm512_mask_storeu_ps(x + j + half, mk, _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c)));
  }
}

// TopKHeap (kernels_ref.h) holds the k best; 16 later scores at a time are compared against
// its threshold, and only the lanes above it are offered one by one.
void TopK(const float* scores, int64_t n, int64_t k, int32_t* out) {
  if (k <= 0) return;
  TopKHeap heap(scores, k);
  for (int64_t i = k; i < n; i += 16) {
    const __mmask16 mk = TailMask(n - i);
    __mmask16 gt = _mm512_mask_cmp_ps_mask(mk, _mm512_maskz_loadu_ps(mk, scores + i),
                                           _mm512_set1_ps(heap.threshold()), _CMP_GT_OQ);
    for (; gt != 0; gt &= gt - 1) {
      const int64_t j = i + __builtin_ctz(gt);
      heap.Offer(scores[j], static_cast<int32_t>(j));  // the threshold may have risen since
    }
  }
  heap.Write(out);
}

// Scores by 16-lane dots, the vector softmax, then out = Σ p_t · v[t] in blocks of 128 output
// values held in eight registers across all positions (each v row is read once per block).
void Attend(const float* qa, const float* qb, int64_t da, int64_t db, const float* const* ka,
            const float* const* kb, const float* const* v, int64_t dv, int64_t n, float scale,
            float* scratch, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    scratch[t] = (Dot(qa, ka[t], da) + Dot(qb, kb[t], db)) * scale;
  }
  Softmax(scratch, n);
  constexpr int kRegs = 8;
  for (int64_t d0 = 0; d0 < dv; d0 += 16 * kRegs) {
    __m512 acc[kRegs];
    __mmask16 mk[kRegs];
    for (int r = 0; r < kRegs; ++r) {
      acc[r] = _mm512_setzero_ps();
      const int64_t left = dv - d0 - 16 * r;
      mk[r] = left <= 0 ? __mmask16(0) : TailMask(left);
    }
    for (int64_t t = 0; t < n; ++t) {
      const __m512 p = _mm512_set1_ps(scratch[t]);
      const float* vt = v[t] + d0;
      for (int r = 0; r < kRegs; ++r) {
        acc[r] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(mk[r], vt + 16 * r), acc[r]);
      }
    }
    for (int r = 0; r < kRegs; ++r) _mm512_mask_storeu_ps(out + d0 + 16 * r, mk[r], acc[r]);
  }
}

}  // namespace avx512

}  // namespace mx
