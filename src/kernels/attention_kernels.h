// Attention and DSA-indexer kernels (glm-moe-dsa.md §3.4–§3.6), reached through the KernelTable
// entries attend_rows, indexer_scores and topk_set. This header holds their shapes, layouts and
// per-level declarations; the scalar twins are attention_ref.cpp, the vector levels
// attention_avx2.cpp / attention_avx512.cpp (both built from attention_simd.inc).
// Legend: m query rows sharing one key set, n keys, da/db the two parts of a key, dv value
// width, Hi index_n_heads, Di index_head_dim, P kIndexerPanel.
#pragma once

#include <cstdint>

// Fully unrolls a register-tile loop (rows × vectors of accumulators). GCC 12 at -O3 otherwise
// keeps such accumulator arrays in memory too, storing every accumulator on each key step (the
// value tile ran at half speed, store-bound); unrolled, they live in registers. Bits unchanged.
#define MX_UNROLL _Pragma("GCC unroll 16")

namespace mx {

// attend_rows processes keys in blocks of this many (online softmax), the blocks in segments of
// kAttendSegment keys: each segment's softmax runs on its own (its own running max and
// denominator, from the segment's first key), and the segments are combined in order by the
// rule of attend_combine. So keys [j·G, (j+1)·G) attended by one call with `stats` (a part)
// and the parts combined give the bits of one call over every key: a caller may split a
// query's keys between threads without changing its output. Its scratch holds
// AttendRowsScratch(m, dv) floats.
inline constexpr int64_t kAttendKeyBlock = 64;
inline constexpr int64_t kAttendSegment = 512;
static_assert(kAttendSegment % kAttendKeyBlock == 0);
inline constexpr int64_t AttendRowsScratch(int64_t m, int64_t dv) {
  return m * (kAttendKeyBlock + 5 + dv);
}

// The indexer's key layout: keys in panels of P positions, each panel [Di, P] (dimension-major,
// so one vector load holds one dimension of P keys and a score needs no horizontal sum). A
// panel set for n keys holds IndexerPanelFloats(n, Di) floats; the positions past n in the
// last panel are zero.
inline constexpr int64_t kIndexerPanel = 16;
inline constexpr int64_t IndexerPanelFloats(int64_t n, int64_t di) {
  return (n + kIndexerPanel - 1) / kIndexerPanel * kIndexerPanel * di;
}
// Where dimension d of key t lives in a panel set.
inline constexpr int64_t IndexerPanelIndex(int64_t t, int64_t d, int64_t di) {
  return (t / kIndexerPanel) * kIndexerPanel * di + d * kIndexerPanel + t % kIndexerPanel;
}
// topk_set's scratch holds TopKSetScratch(n) int32s.
inline constexpr int64_t TopKSetScratch(int64_t n) { return n + 2048; }

// The entries' signatures (documented on KernelTable in kernels.h).
using AttendRowsFn = void (*)(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb,
                              int64_t m, int64_t da, int64_t db, const float* const* ka,
                              const float* const* kb, const float* const* v, int64_t dv, int64_t n,
                              const int64_t* lim, const uint64_t* mask, int64_t ldm, float scale,
                              float* scratch, float* out, int64_t ldo, float* stats);
// attend_rows over bf16 rows (ka, kb, v point at bf16 values, widened exactly): the same
// arithmetic, so the same bits as attend_rows over the widened rows.
using AttendRowsBf16Fn = void (*)(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb,
                                  int64_t m, int64_t da, int64_t db, const uint16_t* const* ka,
                                  const uint16_t* const* kb, const uint16_t* const* v, int64_t dv,
                                  int64_t n, const int64_t* lim, const uint64_t* mask, int64_t ldm,
                                  float scale, float* scratch, float* out, int64_t ldo,
                                  float* stats);
// Combines the parts of m rows (parts[j] + i·ldp, row i's max score and denominator at
// stats[j][2i], stats[j][2i + 1]; parts in key order) into out + i·ldo, normalized.
using AttendCombineFn = void (*)(int64_t m, int64_t dv, int64_t n_parts, const float* const* parts,
                                 int64_t ldp, const float* const* stats, float* out, int64_t ldo);
using IndexerScoresFn = void (*)(const float* q, const float* w, int64_t hi, int64_t di,
                                 const float* panels, int64_t n, float scale, float* out);
// indexer_scores over bf16 panels, one pointer per kIndexerPanel positions (a bf16 cache's
// indexer keys in place): the bits of indexer_scores over the panels widened to fp32.
using IndexerScoresBf16Fn = void (*)(const float* q, const float* w, int64_t hi, int64_t di,
                                     const uint16_t* const* panels, int64_t n, float scale,
                                     float* out);
using TopKSetFn = void (*)(const float* scores, int64_t n, int64_t k, int32_t* out,
                           int32_t* scratch);

namespace ref {
void AttendRows(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m, int64_t da,
                int64_t db, const float* const* ka, const float* const* kb, const float* const* v,
                int64_t dv, int64_t n, const int64_t* lim, const uint64_t* mask, int64_t ldm,
                float scale, float* scratch, float* out, int64_t ldo, float* stats);
void AttendRowsBf16(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m,
                    int64_t da, int64_t db, const uint16_t* const* ka, const uint16_t* const* kb,
                    const uint16_t* const* v, int64_t dv, int64_t n, const int64_t* lim,
                    const uint64_t* mask, int64_t ldm, float scale, float* scratch, float* out,
                    int64_t ldo, float* stats);
void AttendCombine(int64_t m, int64_t dv, int64_t n_parts, const float* const* parts, int64_t ldp,
                   const float* const* stats, float* out, int64_t ldo);
void IndexerScores(const float* q, const float* w, int64_t hi, int64_t di, const float* panels,
                   int64_t n, float scale, float* out);
void IndexerScoresBf16(const float* q, const float* w, int64_t hi, int64_t di,
                       const uint16_t* const* panels, int64_t n, float scale, float* out);
// The slow twin of topk_set: a partial sort, then the set sorted by position.
void TopKSet(const float* scores, int64_t n, int64_t k, int32_t* out, int32_t* scratch);
}  // namespace ref

// Radix select (every vector level uses it): scores mapped to order-preserving uint32 keys, the
// k-th largest key found by histograms of 11, 11 and 10 bits over the surviving candidates, then
// one pass emits the positions above it and the lowest-positioned ties. O(n), no sort.
void RadixTopKSet(const float* scores, int64_t n, int64_t k, int32_t* out, int32_t* scratch);

namespace avx2 {
void AttendRows(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m, int64_t da,
                int64_t db, const float* const* ka, const float* const* kb, const float* const* v,
                int64_t dv, int64_t n, const int64_t* lim, const uint64_t* mask, int64_t ldm,
                float scale, float* scratch, float* out, int64_t ldo, float* stats);
void AttendRowsBf16(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m,
                    int64_t da, int64_t db, const uint16_t* const* ka, const uint16_t* const* kb,
                    const uint16_t* const* v, int64_t dv, int64_t n, const int64_t* lim,
                    const uint64_t* mask, int64_t ldm, float scale, float* scratch, float* out,
                    int64_t ldo, float* stats);
void AttendCombine(int64_t m, int64_t dv, int64_t n_parts, const float* const* parts, int64_t ldp,
                   const float* const* stats, float* out, int64_t ldo);
void IndexerScores(const float* q, const float* w, int64_t hi, int64_t di, const float* panels,
                   int64_t n, float scale, float* out);
void IndexerScoresBf16(const float* q, const float* w, int64_t hi, int64_t di,
                       const uint16_t* const* panels, int64_t n, float scale, float* out);
}  // namespace avx2

namespace avx512 {
void AttendRows(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m, int64_t da,
                int64_t db, const float* const* ka, const float* const* kb, const float* const* v,
                int64_t dv, int64_t n, const int64_t* lim, const uint64_t* mask, int64_t ldm,
                float scale, float* scratch, float* out, int64_t ldo, float* stats);
void AttendRowsBf16(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m,
                    int64_t da, int64_t db, const uint16_t* const* ka, const uint16_t* const* kb,
                    const uint16_t* const* v, int64_t dv, int64_t n, const int64_t* lim,
                    const uint64_t* mask, int64_t ldm, float scale, float* scratch, float* out,
                    int64_t ldo, float* stats);
void AttendCombine(int64_t m, int64_t dv, int64_t n_parts, const float* const* parts, int64_t ldp,
                   const float* const* stats, float* out, int64_t ldo);
void IndexerScores(const float* q, const float* w, int64_t hi, int64_t di, const float* panels,
                   int64_t n, float scale, float* out);
void IndexerScoresBf16(const float* q, const float* w, int64_t hi, int64_t di,
                       const uint16_t* const* panels, int64_t n, float scale, float* out);
}  // namespace avx512

}  // namespace mx
