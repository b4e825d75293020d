// AVX-512 VNNI + VBMI MXFP4 GEMM (see mxfp4.h; the activation panel is mxfp4_tiled.h's Q8Panel):
// four 32-blocks (64 weight bytes) per 512-bit step. vpermb decodes the low and the high nibbles
// into the unsigned doubled table (2·v + 12), one 128-bit lane per block; two vpdpbusd accumulate
// u8 × s8 onto the panel's bias, which removes the +12 shift exactly, so int32 lane l of a block
// holds Σ (2·v)·qs over 8 of its elements; one FMA per step applies the four blocks' scales
// d · 2^(e−128). The scales come 16 blocks at a time: vpmovzxbd of 16 E8M0 bytes, vscalefps of
// the panel's d (exactly the ref's d · E8M0Half(e)), and one vpermps per step spreads each
// block's scale over its lane. Two accumulators per output (even and odd steps) hide the FMA
// latency. A row tile of MR activation rows shares each decoded step (GemmTiling::mr); a single
// row takes two W rows per pass instead; each output's arithmetic is the same either way. The
// last partial group of 16 blocks loads weights and exponents under masks (the panel is zero
// there).
#include <immintrin.h>

#include <algorithm>

#include "kernels/mxfp4.h"
#include "kernels/mxfp4_tiled.h"

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector
// (`__m512i __Y = __Y;`), which -W(maybe-)uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

// 2^(e − 128) exponents of 16 E8M0 bytes as floats, for vscalefps.
inline __m512 Exponents(__m128i e8) {
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(e8), _mm512_set1_epi32(128)));
}

// Blocks b..b+3 of NR W rows (split-half weight bytes w[c]) into acc[c]; idx picks the blocks'
// scales out of s[c]. Each activation vector is loaded once for the NR W rows.
template <int MR, int NR>
[[gnu::always_inline]] inline void Step(const __m512i (&w)[NR], __m512i table, int64_t b,
                                        __m512i idx, const __m512 (&s)[NR][MR],
                                        const Q8Rows<MR>& rows, __m512 (&acc)[NR][MR]) {
  // vpermb indexes with the low 6 bits and the table repeats every 16 bytes: no nibble mask.
  __m512i wl[NR], wh[NR];
  for (int c = 0; c < NR; ++c) {
    wl[c] = _mm512_permutexvar_epi8(w[c], table);
    wh[c] = _mm512_permutexvar_epi8(_mm512_srli_epi16(w[c], 4), table);
  }
  for (int r = 0; r < MR; ++r) {
    const __m512i bias = _mm512_load_si512(rows.bias[r] + b * 4);
    const __m512i lo = _mm512_load_si512(rows.lo[r] + b * 16);
    const __m512i hi = _mm512_load_si512(rows.hi[r] + b * 16);
    for (int c = 0; c < NR; ++c) {
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(bias, wl[c], lo), wh[c], hi);
      acc[c][r] =
          _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, s[c][r]), _mm512_cvtepi32_ps(dot), acc[c][r]);
    }
  }
}

// How far ahead in its W row each group of 16 blocks prefetches (into L1; W rows are
// contiguous, so past a row's end this is the rows that follow). note: measured on the 2-core
// EPYC (mxfp4_bench stream_*): 2 KB took the 8-row GEMM from ~1.5 to ~1.0 ms; 8 KB, three rounds
// side by side with 2 KB, took the streamed down-shape GEMV (1×6144×2048) from 410–440 to
// 260–285 µs and left gate/up (1×2048×6144) where it was (372–421 vs 382–409 µs); 0.25–1 KB
// were slower.
constexpr int64_t kPrefetchAhead = 8192;

// y[r·ldy + c] = row i + r of p (r < MR) · W row c (c < NR; rows nb blocks apart from qj, ej).
struct Tile {
  // W rows per pass: two for a single activation row (each activation vector then serves two
  // W rows, and two weight streams are in flight: the streamed GEMV went from ~305 to ~275 µs);
  // one with a row tile, which already reuses each decoded weight vector MR times.
  template <int MR>
  static constexpr int kWRows = MR == 1 ? 2 : 1;

  template <int MR, int NR>
  static void Run(const Q8Panel& p, int64_t i, const uint8_t* qj, const uint8_t* ej, float* y,
                  int64_t ldy) {
    const int64_t nb = p.nb();
    // Doubled E2M1 table shifted to unsigned: 2·v + 12 for codes 0..15.
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    const __m512i idx0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i idx[4] = {idx0, _mm512_add_epi32(idx0, _mm512_set1_epi32(4)),
                            _mm512_add_epi32(idx0, _mm512_set1_epi32(8)),
                            _mm512_add_epi32(idx0, _mm512_set1_epi32(12))};
    const Q8Rows<MR> rows(p, i);
    __m512 acc0[NR][MR], acc1[NR][MR], s[NR][MR];
    for (int c = 0; c < NR; ++c) {
      for (int r = 0; r < MR; ++r) acc0[c][r] = acc1[c][r] = _mm512_setzero_ps();
    }
    // s[c][r] = d · 2^(e−128) for blocks g.. (exponent bytes e8[c] of W row c).
    auto scales = [&](const __m128i(&e8)[NR], int64_t g) {
      for (int c = 0; c < NR; ++c) {
        const __m512 ex = Exponents(e8[c]);
        for (int r = 0; r < MR; ++r) {
          s[c][r] = _mm512_scalef_ps(_mm512_load_ps(rows.d[r] + g), ex);
        }
      }
    };
    int64_t g = 0;
    for (; g + 16 <= nb; g += 16) {
      __m128i e8[NR];
      for (int c = 0; c < NR; ++c) {
        e8[c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ej + c * nb + g));
      }
      scales(e8, g);
      __m512i w[4][NR];
      for (int c = 0; c < NR; ++c) {
        const uint8_t* qg = qj + (c * nb + g) * 16;
        for (int l = 0; l < 4; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(qg + kPrefetchAhead + 64 * l), _MM_HINT_T0);
        }
        for (int q = 0; q < 4; ++q) w[q][c] = _mm512_loadu_si512(qg + 64 * q);
      }
      Step<MR, NR>(w[0], table, g, idx[0], s, rows, acc0);
      Step<MR, NR>(w[1], table, g + 4, idx[1], s, rows, acc1);
      Step<MR, NR>(w[2], table, g + 8, idx[2], s, rows, acc0);
      Step<MR, NR>(w[3], table, g + 12, idx[3], s, rows, acc1);
    }
    if (g < nb) {  // 1..15 blocks left: the same steps, under masks
      const int left = static_cast<int>(nb - g);
      __m128i e8[NR];
      for (int c = 0; c < NR; ++c) e8[c] = _mm_maskz_loadu_epi8((1u << left) - 1, ej + c * nb + g);
      scales(e8, g);
      // Step q (blocks g + 4q ..), its weights zero past the row's end; unrolled below so that
      // each step's accumulator is known at compile time (registers, not a selected array).
      auto step = [&](int q, __m512(&acc)[NR][MR]) {
        const int bytes = std::clamp((left - 4 * q) * 16, 0, 64);
        const __mmask64 mk = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
        __m512i w[NR];
        for (int c = 0; c < NR; ++c) {
          w[c] = _mm512_maskz_loadu_epi8(mk, qj + (c * nb + g + 4 * q) * 16);
        }
        Step<MR, NR>(w, table, g + 4 * q, idx[q], s, rows, acc);
      };
      step(0, acc0);
      if (left > 4) step(1, acc1);
      if (left > 8) step(2, acc0);
      if (left > 12) step(3, acc1);
    }
    for (int c = 0; c < NR; ++c) {
      for (int r = 0; r < MR; ++r) {
        y[r * ldy + c] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[c][r], acc1[c][r]));
      }
    }
  }
};

}  // namespace

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling t) {
  TiledGemmMxfp4<Tile>(x, m, wq, we, y, ldy, n, k, t);
}

}  // namespace mx::avx512
