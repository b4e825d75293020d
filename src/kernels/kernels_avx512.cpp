// AVX-512 kernels (see kernels_avx512.h). The bf16 GEMM runs on the BF16 dot-product
// instruction vdpbf16ps, which multiplies bf16 pairs exactly and adds them into fp32 lanes: W is
// used as stored; each activation is split once per call into three bf16 parts whose sum is
// the fp32 value exactly (hi = bf16(x), mid = bf16(x − hi), lo = x − hi − mid: 8 + 8 + 8 of
// fp32's 24 mantissa bits), and each part is dotted with W. The products are exact, so the
// result differs from the fp32 FMA kernels only by summation order (kernels_test.cpp's
// kGemmTol; two parts alone, ~16 bits, moved the model's logits by ~5e-5, beyond the fixture
// tolerance). Inputs below 2^-110 count as zero (the instruction flushes denormals). A tile of
// MR rows × NR columns keeps MR·NR accumulators; every output is reduced the same way whatever
// the tile, so all tilings are bit-identical (gemm_tiling.h).
#include "kernels/kernels_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

namespace mx {

namespace {

constexpr int64_t kChunk = 32;
// A single activation row (decode) streams W from memory: each W row is prefetched this many
// elements (512 bytes) ahead. model_bench bf16 decode, batch 1, 3 rounds side by side: 22.6–34.6
// tok/s without, 32.4–37.4 with (1, 2 and 4 KB ahead were no better).
constexpr int64_t kGemvPrefetch = 256;  // bf16 elements per 512-bit vector

// The activations of one call as bf16 hi / mid / lo parts, rows padded with zeros to whole
// chunks.
struct SplitX {
  int64_t k32 = 0;
  std::vector<uint16_t> hi, mid, lo;  // [m, k32]
};

inline __m512 WidenBf16(__m256bh v) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<const __m256i&>(v)), 16));
}

inline void Store(uint16_t* p, __m256bh v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<const __m256i&>(v));
}

SplitX& Split(const float* x, int64_t ldx, int64_t m, int64_t k) {
  thread_local SplitX s;
  s.k32 = (k + kChunk - 1) / kChunk * kChunk;
  s.hi.assign(m * s.k32, 0);
  s.mid.assign(m * s.k32, 0);
  s.lo.assign(m * s.k32, 0);
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * ldx;
    const int64_t o = i * s.k32;
    for (int64_t t = 0; t < k; t += 16) {
      const __mmask16 mk = k - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - t)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(mk, xr + t);
      // Each part widened back to fp32 is exact, and so is each remainder.
      const __m256bh h = _mm512_cvtneps_pbh(v);
      const __m512 r1 = _mm512_sub_ps(v, WidenBf16(h));
      const __m256bh m1 = _mm512_cvtneps_pbh(r1);
      const __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(r1, WidenBf16(m1)));
      Store(s.hi.data() + o + t, h);
      Store(s.mid.data() + o + t, m1);
      Store(s.lo.data() + o + t, l);
    }
  }
  return s;
}

// y[MR rows, NR columns] = (hi + mid + lo)[MR, k] · w[NR, k]ᵀ.
template <int MR, int NR>
inline void MicroKernel(const SplitX& s, int64_t row, const uint16_t* w, int64_t ldw, float* y,
                        int64_t ldy, int64_t k) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  const uint16_t* xh = s.hi.data() + row * s.k32;
  const uint16_t* xm = s.mid.data() + row * s.k32;
  const uint16_t* xl = s.lo.data() + row * s.k32;
  for (int64_t t = 0; t < k; t += kChunk) {
    const __mmask32 mk = k - t >= kChunk ? ~__mmask32(0) : __mmask32((uint64_t{1} << (k - t)) - 1);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) {
      if constexpr (MR == 1) {
        _mm_prefetch(reinterpret_cast<const char*>(w + j * ldw + t + kGemvPrefetch), _MM_HINT_T0);
      }
      wv[j] = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mk, w + j * ldw + t));
    }
    for (int i = 0; i < MR; ++i) {
      const int64_t o = i * s.k32 + t;
      const __m512bh h = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xh + o));
      const __m512bh md = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xm + o));
      const __m512bh l = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xl + o));
      for (int j = 0; j < NR; ++j) {  // smallest part first
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], l, wv[j]);
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], md, wv[j]);
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], h, wv[j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

template <int MR, int NR>
void RowTile(const SplitX& s, int64_t row, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
             int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + NR <= n; j += NR) MicroKernel<MR, NR>(s, row, w + j * ldw, ldw, y + j, ldy, k);
  for (; j < n; ++j) MicroKernel<MR, 1>(s, row, w + j * ldw, ldw, y + j, ldy, k);
}

}  // namespace

namespace avx512 {

void GemmBf16Dot(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, GemmTiling t) {
  if (m <= 0 || n <= 0) return;
  const SplitX& s = Split(x, ldx, m, k);
  const int mr = t.mr == 0 ? 4 : t.mr;
  const int64_t nb = t.nb > 0 ? t.nb : n;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t cols = std::min(nb, n - j0);
    const uint16_t* wb = w + j0 * ldw;
    float* yb = y + j0;
    int64_t i = 0;
    if (mr == 4) {
      for (; i + 4 <= m; i += 4) RowTile<4, 4>(s, i, wb, ldw, yb + i * ldy, ldy, cols, k);
    } else if (mr == 2) {
      for (; i + 2 <= m; i += 2) RowTile<2, 6>(s, i, wb, ldw, yb + i * ldy, ldy, cols, k);
    }
    for (; i < m; ++i) RowTile<1, 8>(s, i, wb, ldw, yb + i * ldy, ldy, cols, k);
  }
}

}  // namespace avx512

}  // namespace mx
