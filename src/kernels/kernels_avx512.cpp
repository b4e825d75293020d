// AVX-512 kernels (see kernels_avx512.h). The bf16 GEMM runs on the BF16 dot-product
// instruction vdpbf16ps, which multiplies bf16 pairs exactly and adds them into fp32 lanes; W is
// used as stored. Activations come in one of two precisions (kernels.h, GemmActivations):
// - kFp32: each activation is split once per call into three bf16 parts whose sum is the fp32
//   value exactly (hi = bf16(x), mid = bf16(x − hi), lo = x − hi − mid: 8 + 8 + 8 of fp32's 24
//   mantissa bits), and each part is dotted with W. The products are exact, so the result
//   differs from the fp32 FMA kernels only by summation order (kernels_test.cpp's kGemmTol).
//   Three instructions per product: a third of the instruction's rate.
// - kBf16: x is rounded to bf16 once (hi alone), one instruction per product, as llama.cpp,
//   vLLM and sglang run bf16 weights; the error is that rounding (≤ 2^-9 of each activation).
// Inputs below 2^-110 count as zero (the instruction flushes denormals). A tile of MR rows × NR
// columns keeps MR·NR accumulators, reduced 16 at a time by one fixed tree (Reduce16) that
// gives every output the same summation order whatever the tile, so all tilings, and a row
// alone or in a batch, are bit-identical (gemm_tiling.h).
#include "kernels/kernels_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "base/scratch.h"
#include "kernels/bf16_split_avx512.h"

namespace mx {

namespace {

constexpr int64_t kChunk = 32;
// A single activation row (decode) streams W from memory with no reuse, so the hardware
// prefetcher alone leaves the loads waiting: each W row is prefetched this many elements
// (512 bytes, a few cache lines) ahead; further ahead cannot help a stream that is already
// bandwidth-bound and only risks evicting lines before use.
constexpr int64_t kGemvPrefetch = 256;  // bf16 elements per 512-bit vector

// The activations of one call as bf16 parts (hi, and mid / lo for kFp32), rows padded with
// zeros to whole chunks.
struct SplitX {
  int64_t k32 = 0;
  std::vector<uint16_t> hi, mid, lo;  // [m, k32]
};

inline void Store(uint16_t* p, __m256bh v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<const __m256i&>(v));
}

template <int P>
SplitX& Split(const float* x, int64_t ldx, int64_t m, int64_t k) {
  thread_local SplitX s;
  s.k32 = (k + kChunk - 1) / kChunk * kChunk;
  Grow(s.hi, m * s.k32);
  if constexpr (P == 3) {
    Grow(s.mid, m * s.k32);
    Grow(s.lo, m * s.k32);
  }
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * ldx;
    const int64_t o = i * s.k32;
    for (int64_t t = 0; t < s.k32; t += 16) {
      const int64_t left = k - t;
      const __mmask16 mk = left >= 16  ? __mmask16(0xffff)
                           : left <= 0 ? __mmask16(0)
                                       : __mmask16((1u << left) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(mk, xr + t);  // zeros past k
      // Each part widened back to fp32 is exact, and so is each remainder.
      if constexpr (P == 3) {
        const avx512::Bf16Parts parts = avx512::SplitBf16(v);
        Store(s.hi.data() + o + t, parts.hi);
        Store(s.mid.data() + o + t, parts.mid);
        Store(s.lo.data() + o + t, parts.lo);
      } else {
        Store(s.hi.data() + o + t, _mm512_cvtneps_pbh(v));
      }
    }
  }
  return s;
}

// Writes the MR×NR accumulators' sums to y (row stride ldy).
template <int MR, int NR>
inline void StoreSums(const __m512 (&acc)[MR][NR], float* y, int64_t ldy) {
  constexpr int kN = MR * NR;
  for (int b = 0; b < kN; b += 16) {
    __m512 a[16];
    for (int i = 0; i < 16; ++i) {
      const int e = std::min(b + i, kN - 1);
      a[i] = acc[e / NR][e % NR];
    }
    alignas(64) float out[16];
    _mm512_store_ps(out, avx512::Reduce16(a));
    for (int i = 0; i < 16 && b + i < kN; ++i) y[(b + i) / NR * ldy + (b + i) % NR] = out[i];
  }
}

// One chunk of 32 k values: acc[i][j] += parts of x row i · w row j over [t, t + 32). W loads
// under `mk` (the last, partial chunk) or plain (the rest: masked loads cost more on some
// cores); x rows are padded to whole chunks, so they load plain.
template <int P, int MR, int NR, bool kMasked>
[[gnu::always_inline]] inline void Chunk(const uint16_t* xh, const uint16_t* xm, const uint16_t* xl,
                                         int64_t k32, const uint16_t* w, int64_t ldw, int64_t t,
                                         __mmask32 mk, __m512 (&acc)[MR][NR]) {
  __m512bh wv[NR];
  for (int j = 0; j < NR; ++j) {
    const uint16_t* wj = w + j * ldw + t;
    _mm_prefetch(reinterpret_cast<const char*>(wj + kGemvPrefetch), _MM_HINT_T0);
    wv[j] = reinterpret_cast<__m512bh>(kMasked ? _mm512_maskz_loadu_epi16(mk, wj)
                                               : _mm512_loadu_si512(wj));
  }
  for (int i = 0; i < MR; ++i) {
    const int64_t o = i * k32 + t;
    const __m512bh h = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xh + o));
    if constexpr (P == 3) {
      const __m512bh md = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xm + o));
      const __m512bh l = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xl + o));
      for (int j = 0; j < NR; ++j) {  // smallest part first
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], l, wv[j]);
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], md, wv[j]);
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], h, wv[j]);
      }
    } else {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], h, wv[j]);
    }
  }
}

// y[MR rows, NR columns] = Σ parts[MR, k] · w[NR, k]ᵀ.
template <int P, int MR, int NR>
inline void MicroKernel(const SplitX& s, int64_t row, const uint16_t* w, int64_t ldw, float* y,
                        int64_t ldy, int64_t k) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  const uint16_t* xh = s.hi.data() + row * s.k32;
  const uint16_t* xm = P == 3 ? s.mid.data() + row * s.k32 : nullptr;
  const uint16_t* xl = P == 3 ? s.lo.data() + row * s.k32 : nullptr;
  const int64_t full = k / kChunk * kChunk;
  for (int64_t t = 0; t < full; t += kChunk) {
    Chunk<P, MR, NR, false>(xh, xm, xl, s.k32, w, ldw, t, 0, acc);
  }
  if (full < k) {
    const __mmask32 mk = __mmask32((uint64_t{1} << (k - full)) - 1);
    Chunk<P, MR, NR, true>(xh, xm, xl, s.k32, w, ldw, full, mk, acc);
  }
  StoreSums<MR, NR>(acc, y, ldy);
}

template <int P, int MR, int NR>
void RowTile(const SplitX& s, int64_t row, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
             int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + NR <= n; j += NR) MicroKernel<P, MR, NR>(s, row, w + j * ldw, ldw, y + j, ldy, k);
  for (; j < n; ++j) MicroKernel<P, MR, 1>(s, row, w + j * ldw, ldw, y + j, ldy, k);
}

template <int P>
void GemmDot(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmTiling t) {
  if (m <= 0 || n <= 0) return;
  const SplitX& s = Split<P>(x, ldx, m, k);
  const int mr = t.mr == 0 ? 4 : t.mr;
  const int64_t nb = t.nb > 0 ? t.nb : n;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t cols = std::min(nb, n - j0);
    const uint16_t* wb = w + j0 * ldw;
    float* yb = y + j0;
    int64_t i = 0;
    if (mr >= 4) {
      for (; i + 4 <= m; i += 4) RowTile<P, 4, 4>(s, i, wb, ldw, yb + i * ldy, ldy, cols, k);
    } else if (mr == 2) {
      for (; i + 2 <= m; i += 2) RowTile<P, 2, 8>(s, i, wb, ldw, yb + i * ldy, ldy, cols, k);
    }
    for (; i < m; ++i) RowTile<P, 1, 8>(s, i, wb, ldw, yb + i * ldy, ldy, cols, k);
  }
}

}  // namespace

namespace avx512 {

void GemmBf16Dot(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, GemmTiling t) {
  GemmDot<3>(x, ldx, w, ldw, y, ldy, m, n, k, t);
}

void GemmBf16DotX16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y,
                    int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t) {
  GemmDot<1>(x, ldx, w, ldw, y, ldy, m, n, k, t);
}

}  // namespace avx512

}  // namespace mx
