// AVX-512 VNNI + VBMI MXFP4 GEMM over the packed 16-row groups (mxfp4.h): per 32-block of a
// group, four 64-byte loads hold the 16 rows' codes; vpermb decodes their low and high nibbles
// into the unsigned doubled table (2·v + 12), giving eight vectors whose int32 lane l holds 4
// consecutive elements of row l. Each activation row then needs, per block, eight vpdpbusd
// against a broadcast of 4 of its int8 values (no shuffles, no horizontal sums): the block's
// integer dots of all 16 rows at once, started at −12 · Σ qs to remove the table's shift. One
// vscalefps makes the 16 rows' scales d · 2^(e−128) and one FMA adds the block to the row's
// accumulator — the ref's arithmetic, lane for lane. A row tile of MR activation rows shares
// each decoded block (GemmTiling::mr); each row keeps two integer chains (even and odd
// vectors) so the vpdpbusd latency overlaps.
#include <immintrin.h>

#include <cstring>

#include "kernels/mxfp4.h"
#include "kernels/mxfp4_tiled.h"
#include "kernels/weight_prefetch.h"

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector
// (`__m512i __Y = __Y;`), which -W(maybe-)uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

// 2^(e − 128) exponents of 16 E8M0 bytes as floats, for vscalefps.
inline __m512 Exponents(const uint8_t* e) {
  const __m128i e8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(e));
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(e8), _mm512_set1_epi32(128)));
}

// 4 int8 activations broadcast to every int32 lane.
inline __m512i Broadcast4(const int8_t* qs) {
  int32_t v;
  std::memcpy(&v, qs, 4);
  return _mm512_set1_epi32(v);
}

// How far ahead in the group's codes each block prefetches (gemm_tiling.h): a lone activation
// row's pass (RunGroups) kWeightPrefetchAhead into L2, a tile of rows 2 KB into L1 (as before).
// Groups are contiguous, so past a group's end this is the next group's start, which a
// single-row pass reads next.
constexpr int64_t kTilePrefetchAhead = 2048;

// The 16 rows' codes of one 32-block at bq (prefetching ahead as above): w[v] holds elements
// 4v..4v+3 of every row (v < 4: low nibbles, else high), as the doubled unsigned table.
template <bool kLoneRow>
inline void DecodeBlock(const uint8_t* bq, __m512i table, __m512i w[8]) {
  for (int c = 0; c < 4; ++c) {
    PrefetchWeights<kLoneRow, kTilePrefetchAhead>(bq + 64 * c);
    const __m512i raw = _mm512_loadu_si512(bq + 64 * c);
    w[c] = _mm512_permutexvar_epi8(raw, table);
    w[c + 4] = _mm512_permutexvar_epi8(_mm512_srli_epi16(raw, 4), table);
  }
}

// acc + the 16 rows' dots of a decoded block with activation block xb, the rows' scales `ex`.
inline __m512 AddBlock(const BlockQ8& xb, const __m512i w[8], __m512 ex, __m512 acc) {
  __m512i d0 = _mm512_set1_epi32(-12 * xb.sum), d1 = _mm512_setzero_si512();
  for (int v = 0; v < 8; v += 2) {
    d0 = _mm512_dpbusd_epi32(d0, w[v], Broadcast4(xb.qs + 4 * v));
    d1 = _mm512_dpbusd_epi32(d1, w[v + 1], Broadcast4(xb.qs + 4 * v + 4));
  }
  const __m512 s = _mm512_scalef_ps(_mm512_set1_ps(xb.d), ex);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), s, acc);
}

struct Tile {
  template <int MR>
  static void Run(const BlockQ8* x, int64_t nb, const uint8_t* gq, const uint8_t* ge, float* y,
                  int64_t ldy, int lo, int hi) {
    // Doubled E2M1 table shifted to unsigned: 2·v + 12 for codes 0..15, repeated per 16 bytes
    // (vpermb reads the low 6 bits of an index, so no nibble mask is needed).
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512 acc[MR];
    for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m512i w[8];
      DecodeBlock<MR == 1>(gq + b * kMxGroupBlockBytes, table, w);
      const __m512 ex = Exponents(ge + b * kMxRowGroup);
      for (int r = 0; r < MR; ++r) acc[r] = AddBlock(x[r * nb + b], w, ex, acc[r]);
    }
    if (lo == 0 && hi == kMxRowGroup) {
      for (int r = 0; r < MR; ++r) _mm512_storeu_ps(y + r * ldy, acc[r]);
      return;
    }
    // A partial group (a slice boundary or W's last rows): lanes lo..hi-1, packed to y.
    const __mmask16 keep = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
    for (int r = 0; r < MR; ++r) _mm512_mask_compressstoreu_ps(y + r * ldy, keep, acc[r]);
  }

  // One activation row against NG consecutive whole groups, block by block: NG code streams
  // in flight (mxfp4_tiled.h); per group exactly Run<1>'s operations.
  template <int NG>
  static void RunGroups(const BlockQ8* x, int64_t nb, const uint8_t* gq, const uint8_t* ge,
                        float* y) {
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    const int64_t gstride = nb * kMxGroupBlockBytes;
    __m512 acc[NG];
    for (int j = 0; j < NG; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      for (int j = 0; j < NG; ++j) {
        __m512i w[8];
        DecodeBlock<true>(gq + j * gstride + b * kMxGroupBlockBytes, table, w);
        acc[j] = AddBlock(x[b], w, Exponents(ge + (j * nb + b) * kMxRowGroup), acc[j]);
      }
    }
    for (int j = 0; j < NG; ++j) _mm512_storeu_ps(y + j * kMxRowGroup, acc[j]);
  }
};

}  // namespace

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
               int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  GroupedGemmMxfp4<Tile>(x, m, wq, we, k, r0, r1, y, ldy, t);
}

}  // namespace mx::avx512
