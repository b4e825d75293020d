// attend_rows_bf16 with vdpbf16ps (AVX512_BF16), the entry of the bf16-activations table
// (GemmActivations::kBf16) where the CPU has the instruction: the absorbed MLA attention over a
// bf16 cache in place, at twice the multiply-adds per instruction of fp32 FMAs over widened rows
// and without the widening.
// - Each query value and each probability is taken as three bf16 parts (hi = bf16(x), mid =
//   bf16(x − hi), lo = the rest: exactly x, as the bf16 GEMMs split fp32 activations), smallest
//   first, so the products are exact and only the order of the fp32 sums differs from
//   attend_rows. Fewer parts are faster (one: 2.3x this kernel's speed at the decode shape) but
//   not as close to the expanded form (fp32): 2^-8 or 2^-16 relative differences flip greedy
//   tokens where batching changes a row's form (the engine's identity and constraint tests).
// - Scores: query rows split once per call (zero-padded to whole vectors), then tiles of kR rows
//   × kK keys, 32 bf16 pairs per instruction, the 16 sums reduced together (Reduce16, shared
//   with the GEMMs in bf16_split_avx512.h) rather
//   than one horizontal sum each; the next tile's key rows are prefetched (DSA's selected rows
//   are scattered over the cache).
// - Weighted sum: keys taken in pairs: two value rows interleaved by vpunpck{l,h}wd are one
//   operand, the pair's probabilities (each part) broadcast the other. The accumulators hold 32
//   dimensions in the unpack's order ({0-3, 8-11, 16-19, 24-27} and {4-7, ...}); the output rows
//   are permuted into it on load and back on store.
// Every row's arithmetic is the same whichever rows share its tile (rows and keys past a tile's
// end repeat a valid one and are dropped; a pair past a row's keys has probability 0), so a
// query gives the same bits alone or in a batch.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/scratch.h"
#include "kernels/attention_kernels.h"
#include "kernels/bf16_split_avx512.h"
#include "kernels/exp_avx512.h"

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector
// (`__m512i __Y = __Y;`), which -W(maybe-)uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

constexpr int kR = 4;       // query rows per tile
constexpr int kK = 4;       // keys per score tile (kR · kK = 16 sums reduced together)
constexpr int64_t kC = 32;  // bf16 values per vector
constexpr int64_t kB = kAttendKeyBlock;
constexpr int64_t kPbStride = kB + 2;  // a row's bf16 probabilities (+ a zero pair past the end)

inline __mmask32 M32(int64_t cnt) {
  return cnt >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint32_t{1} << cnt) - 1u);
}
inline __mmask16 M16(int64_t cnt) {
  if (cnt <= 0) return 0;
  return cnt >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << cnt) - 1u);
}
inline __m512bh AsBh(__m512i x) { return reinterpret_cast<__m512bh>(x); }
// The 16 values' three parts at p, p + stride and p + 2·stride (lanes under `mk`).
inline void StoreParts(const Bf16Parts& v, uint16_t* p, int64_t stride, __mmask16 mk) {
  _mm256_mask_storeu_epi16(p, mk, reinterpret_cast<const __m256i&>(v.hi));
  _mm256_mask_storeu_epi16(p + stride, mk, reinterpret_cast<const __m256i&>(v.mid));
  _mm256_mask_storeu_epi16(p + 2 * stride, mk, reinterpret_cast<const __m256i&>(v.lo));
}
// acc[4r + j] += q[r][0..d) · k[j][0..d) over bf16 values, q in three parts at q[r] (hi),
// q[r] + part (mid) and q[r] + 2·part (lo, added first), zero-padded to whole vectors.
inline void DotPart(const uint16_t* const (&q)[kR], int64_t part, const uint16_t* const (&k)[kK],
                    int64_t d, __m512 (&acc)[16]) {
  int64_t i = 0;
  auto step = [&](__mmask32 mk) {
    __m512bh kv[kK];
    for (int j = 0; j < kK; ++j) kv[j] = AsBh(_mm512_maskz_loadu_epi16(mk, k[j] + i));
    MX_UNROLL for (int r = 0; r < kR; ++r) {
      const __m512bh ql = AsBh(_mm512_loadu_si512(q[r] + 2 * part + i));
      const __m512bh qm = AsBh(_mm512_loadu_si512(q[r] + part + i));
      const __m512bh qh = AsBh(_mm512_loadu_si512(q[r] + i));
      for (int j = 0; j < kK; ++j) {
        acc[r * kK + j] = _mm512_dpbf16_ps(
            _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r * kK + j], ql, kv[j]), qm, kv[j]), qh, kv[j]);
      }
    }
  };
  for (; i + kC <= d; i += kC) step(~__mmask32{0});
  if (i < d) step(M32(d - i));
}

// Scores of rows q (a: da values, b: db values at offset pa; parts `part` apart) against keys:
// lane 4r + j of the result = q_r · k_j, unscaled.
inline __m512 ScoreTile(const uint16_t* const (&qa)[kR], const uint16_t* const (&qb)[kR],
                        int64_t part, const uint16_t* const (&ka)[kK],
                        const uint16_t* const (&kb)[kK], int64_t da, int64_t db) {
  __m512 acc[16];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  DotPart(qa, part, ka, da, acc);
  DotPart(qb, part, kb, db, acc);
  return Reduce16(acc);
}

// o_r[d0, d0 + w) = o_r · c_r + Σ_{t in [t0, te)} p_r[t - t0] · v_t[d0 ..], w <= 64, for the
// first `rows` of kR rows (the others are computed and dropped). te - t0 may be odd: the pair
// past the end has probability 0 and repeats the last value row.
template <int NCH>  // 32-dimension chunks: w in (32·(NCH - 1), 32·NCH]
[[gnu::always_inline]] inline void PvTile(float* const (&o)[kR], const float (&c)[kR],
                                          const uint16_t* const (&p)[kR], int rows,
                                          const uint16_t* const* v, int64_t t0, int64_t te,
                                          int64_t d0, int64_t w) {
  constexpr int nch = NCH;
  __mmask32 mk[NCH];
  for (int ch = 0; ch < nch; ++ch) mk[ch] = M32(w - ch * kC);
  __m512 acc[kR][2 * NCH];
  MX_UNROLL for (int r = 0; r < kR; ++r) {
    const __m512 cr = _mm512_set1_ps(c[r]);
    for (int ch = 0; ch < nch; ++ch) {
      const int64_t rem = w - ch * kC;
      const float* src = o[r] + d0 + ch * kC;
      const __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(M16(rem), src), cr);
      const __m512 b = _mm512_mul_ps(_mm512_maskz_loadu_ps(M16(rem - 16), src + 16), cr);
      acc[r][2 * ch] = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
      acc[r][2 * ch + 1] = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    }
  }
  for (int64_t t = t0; t < te; t += 2) {
    const uint16_t* v0 = v[t] + d0;
    const uint16_t* v1 = t + 1 < te ? v[t + 1] + d0 : v0;
    __m512bh lo[NCH], hi[NCH];
    for (int ch = 0; ch < nch; ++ch) {
      const __m512i a = _mm512_maskz_loadu_epi16(mk[ch], v0 + ch * kC);
      const __m512i b = _mm512_maskz_loadu_epi16(mk[ch], v1 + ch * kC);
      lo[ch] = AsBh(_mm512_unpacklo_epi16(a, b));
      hi[ch] = AsBh(_mm512_unpackhi_epi16(a, b));
    }
    MX_UNROLL for (int r = 0; r < kR; ++r) {
      uint32_t ph, pm, pl;  // the pair's probabilities, high, mid and low parts
      std::memcpy(&ph, p[r] + (t - t0), sizeof(ph));
      std::memcpy(&pm, p[r] + kPbStride + (t - t0), sizeof(pm));
      std::memcpy(&pl, p[r] + 2 * kPbStride + (t - t0), sizeof(pl));
      const __m512bh bh = AsBh(_mm512_set1_epi32(static_cast<int>(ph)));
      const __m512bh bm = AsBh(_mm512_set1_epi32(static_cast<int>(pm)));
      const __m512bh bl = AsBh(_mm512_set1_epi32(static_cast<int>(pl)));
      for (int ch = 0; ch < nch; ++ch) {
        acc[r][2 * ch] = _mm512_dpbf16_ps(
            _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][2 * ch], lo[ch], bl), lo[ch], bm), lo[ch], bh);
        acc[r][2 * ch + 1] = _mm512_dpbf16_ps(
            _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][2 * ch + 1], hi[ch], bl), hi[ch], bm), hi[ch],
            bh);
      }
    }
  }
  const __m512i ia = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i ib =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int r = 0; r < rows; ++r) {
    for (int ch = 0; ch < nch; ++ch) {
      const int64_t rem = w - ch * kC;
      float* dst = o[r] + d0 + ch * kC;
      _mm512_mask_storeu_ps(dst, M16(rem),
                            _mm512_permutex2var_ps(acc[r][2 * ch], ia, acc[r][2 * ch + 1]));
      _mm512_mask_storeu_ps(dst + 16, M16(rem - 16),
                            _mm512_permutex2var_ps(acc[r][2 * ch], ib, acc[r][2 * ch + 1]));
    }
  }
}

}  // namespace

void AttendRowsBf16Dot(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m,
                       int64_t da, int64_t db, const uint16_t* const* ka, const uint16_t* const* kb,
                       const uint16_t* const* v, int64_t dv, int64_t n, const int64_t* lim,
                       const uint64_t* mask, int64_t ldm, float scale, float* scratch, float* out,
                       int64_t ldo) {
  float* s = scratch;      // [m, kB] this block's scores
  float* mx = s + m * kB;  // [m] running max
  float* sum = mx + m;     // [m] running denominator (of the probabilities' parts)
  float* c = sum + m;      // [m] this block's rescale of the row's output
  // The rows as bf16 parts, each [da padded | db padded] to whole vectors with zeros; the
  // block's probabilities likewise (grown once per thread, reused by every later call).
  thread_local std::vector<uint16_t> qbuf, pbuf;
  const int64_t pa = (da + kC - 1) / kC * kC, pw = pa + (db + kC - 1) / kC * kC;
  uint16_t* qx = Grow(qbuf, 3 * m * pw);
  uint16_t* pb = Grow(pbuf, 3 * m * kPbStride);
  int64_t n_max = 0;
  for (int64_t i = 0; i < m; ++i) {
    uint16_t* row = qx + 3 * i * pw;  // [hi | mid | lo], each [a | b] zero-padded
    for (int64_t d = 0; d < pa; d += 16) {
      StoreParts(SplitBf16(_mm512_maskz_loadu_ps(M16(da - d), qa + i * ldqa + d)), row + d, pw,
                 0xffff);
    }
    for (int64_t d = 0; d < pw - pa; d += 16) {
      StoreParts(SplitBf16(_mm512_maskz_loadu_ps(M16(db - d), qb + i * ldqb + d)), row + pa + d, pw,
                 0xffff);
    }
    n_max = std::max(n_max, lim == nullptr ? n : lim[i]);
    mx[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0.0f;
    std::fill(out + i * ldo, out + i * ldo + dv, 0.0f);
  }
  auto keys_of = [&](int64_t i0, int r, int64_t t0, int64_t t1) {
    int64_t te = t0;
    for (int j = 0; j < r; ++j) te = std::max(te, std::min(t1, lim == nullptr ? n : lim[i0 + j]));
    return te;
  };
  for (int64_t t0 = 0; t0 < n_max; t0 += kB) {
    const int64_t t1 = std::min(t0 + kB, n_max);
    // Scores, kR rows × kK keys per tile.
    for (int64_t i0 = 0; i0 < m; i0 += kR) {
      const int r = static_cast<int>(std::min<int64_t>(kR, m - i0));
      const int64_t te = keys_of(i0, r, t0, t1);
      const uint16_t* q_a[kR];
      const uint16_t* q_b[kR];
      MX_UNROLL for (int j = 0; j < kR; ++j) {
        q_a[j] = qx + 3 * (i0 + std::min(j, r - 1)) * pw;
        q_b[j] = q_a[j] + pa;
      }
      for (int64_t t = t0; t < te; t += kK) {
        const int nk = static_cast<int>(std::min<int64_t>(kK, te - t));
        const uint16_t* k_a[kK];
        const uint16_t* k_b[kK];
        for (int j = 0; j < kK; ++j) {
          k_a[j] = ka[t + std::min(j, nk - 1)];
          k_b[j] = kb[t + std::min(j, nk - 1)];
        }
        if (i0 == 0) {  // the next tile's keys, from memory (scattered rows) into L1 ahead
          for (int64_t u = t + kK; u < std::min(te, t + 2 * kK); ++u) {
            const char* a = reinterpret_cast<const char*>(ka[u]);
            for (int64_t off = 0; off < da * 2; off += 64) _mm_prefetch(a + off, _MM_HINT_T0);
            const char* b = reinterpret_cast<const char*>(kb[u]);
            for (int64_t off = 0; off < db * 2; off += 64) _mm_prefetch(b + off, _MM_HINT_T0);
          }
        }
        alignas(64) float sc[16];
        _mm512_store_ps(
            sc, _mm512_mul_ps(ScoreTile(q_a, q_b, pw, k_a, k_b, da, db), _mm512_set1_ps(scale)));
        for (int j = 0; j < r; ++j)
          std::copy(sc + j * kK, sc + j * kK + nk, s + (i0 + j) * kB + (t - t0));
      }
    }
    // Per row: the block's probabilities as bf16 parts (0 past the row's keys and masked keys).
    for (int64_t i = 0; i < m; ++i) {
      const int64_t li = lim == nullptr ? n : lim[i];
      float* si = s + i * kB;
      uint16_t* pi = pb + 3 * i * kPbStride;  // [hi | mid | lo]
      std::fill(pi, pi + 3 * kPbStride, uint16_t{0});
      const int64_t k1 = std::min(t1, li) - t0;
      if (k1 <= 0) {
        c[i] = 1.0f;
        continue;
      }
      const bool masked = mask != nullptr;
      const uint64_t word = masked ? mask[i * ldm + (t0 >> 6)] : ~uint64_t{0};
      auto on = [&](int64_t t) { return static_cast<__mmask16>(word >> t); };
      const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      __m512 vm = ninf;
      for (int64_t t = 0; t < k1; t += 16) {
        const __mmask16 live = M16(k1 - t) & (masked ? on(t) : __mmask16{0xffff});
        vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(ninf, live, si + t));
      }
      const float bm = _mm512_reduce_max_ps(vm);
      if (bm == -std::numeric_limits<float>::infinity()) {  // every key masked off
        c[i] = 1.0f;
        continue;
      }
      const float new_max = std::max(mx[i], bm);
      c[i] = std::exp(mx[i] - new_max);  // 0 on the first block (mx = -inf)
      const __m512 nm = _mm512_set1_ps(new_max);
      __m512 vs = _mm512_setzero_ps();
      for (int64_t t = 0; t < k1; t += 16) {
        const __mmask16 live = M16(k1 - t) & (masked ? on(t) : __mmask16{0xffff});
        const __m512 e = _mm512_maskz_mov_ps(
            live, ExpAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, si + t), nm)));
        StoreParts(SplitBf16(e), pi + t, kPbStride, M16(k1 - t));
        vs = _mm512_add_ps(vs, e);
      }
      sum[i] = sum[i] * c[i] + _mm512_reduce_add_ps(vs);
      mx[i] = new_max;
    }
    // The values, kR rows × 64 dimensions per tile.
    for (int64_t i0 = 0; i0 < m; i0 += kR) {
      const int r = static_cast<int>(std::min<int64_t>(kR, m - i0));
      const int64_t te = keys_of(i0, r, t0, t1);
      if (te <= t0) continue;
      float* o_r[kR];
      float c_r[kR];
      const uint16_t* p_r[kR];
      MX_UNROLL for (int j = 0; j < kR; ++j) {
        const int64_t i = i0 + std::min(j, r - 1);
        o_r[j] = out + i * ldo;
        c_r[j] = c[i];
        p_r[j] = pb + 3 * i * kPbStride;
      }
      for (int64_t d0 = 0; d0 < dv; d0 += 2 * kC) {
        const int64_t w = std::min<int64_t>(2 * kC, dv - d0);
        if (w > kC) {
          PvTile<2>(o_r, c_r, p_r, r, v, t0, te, d0, w);
        } else {
          PvTile<1>(o_r, c_r, p_r, r, v, t0, te, d0, w);
        }
      }
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    const float inv = 1.0f / sum[i];
    float* o = out + i * ldo;
    for (int64_t d = 0; d < dv; ++d) o[d] *= inv;
  }
}

}  // namespace mx::avx512
