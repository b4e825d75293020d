// Scalar twins of the attention and indexer kernels (attention_kernels.h), and the radix top-k
// set every vector level uses.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "base/numerics.h"
#include "kernels/attention_kernels.h"

namespace mx {

namespace ref {

namespace {

// Folds part a (max pm, denominator ps) into the running row o (max *mx, denominator *sum), the
// rule attention_simd.inc's CombinePart applies (a part that attended no key changes nothing).
void CombineRow(int64_t dv, float* o, float* mx, float* sum, const float* a, float pm, float ps) {
  if (pm == -std::numeric_limits<float>::infinity()) return;
  if (*mx == -std::numeric_limits<float>::infinity()) {
    std::copy(a, a + dv, o);
    *mx = pm, *sum = ps;
    return;
  }
  const float nm = std::max(*mx, pm), co = std::exp(*mx - nm), ca = std::exp(pm - nm);
  for (int64_t d = 0; d < dv; ++d) o[d] = std::fma(a[d], ca, o[d] * co);
  *sum = std::fma(ps, ca, *sum * co);
  *mx = nm;
}

}  // namespace

// Each row on its own, each segment of kAttendSegment keys on its own (its scores, their
// softmax, the weighted sum of values), the segments folded in order by CombineRow.
void AttendRows(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m, int64_t da,
                int64_t db, const float* const* ka, const float* const* kb, const float* const* v,
                int64_t dv, int64_t n, const int64_t* lim, const uint64_t* mask, int64_t ldm,
                float scale, float* /*scratch*/, float* out, int64_t ldo, float* stats) {
  constexpr float kNinf = -std::numeric_limits<float>::infinity();
  std::vector<float> s(kAttendSegment), part(dv);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t ni = lim == nullptr ? n : lim[i];
    const float* a = qa + i * ldqa;
    const float* b = qb + i * ldqb;
    auto on = [&](int64_t t) {
      return mask == nullptr || (mask[i * ldm + t / 64] >> (t % 64) & 1);
    };
    float* o = out + i * ldo;
    std::fill(o, o + dv, 0.0f);
    float gmx = kNinf, gsum = 0.0f;
    for (int64_t g0 = 0; g0 < ni; g0 += kAttendSegment) {
      const int64_t g1 = std::min(g0 + kAttendSegment, ni);
      float mx = kNinf;
      for (int64_t t = g0; t < g1; ++t) {
        if (!on(t)) continue;
        float acc = 0.0f;
        for (int64_t d = 0; d < da; ++d) acc += a[d] * ka[t][d];
        for (int64_t d = 0; d < db; ++d) acc += b[d] * kb[t][d];
        s[t - g0] = acc * scale;
        mx = std::max(mx, s[t - g0]);
      }
      float sum = 0.0f;
      for (int64_t t = g0; t < g1; ++t) {
        sum += (s[t - g0] = on(t) && mx != kNinf ? std::exp(s[t - g0] - mx) : 0.0f);
      }
      std::fill(part.begin(), part.end(), 0.0f);
      for (int64_t t = g0; t < g1; ++t) {
        for (int64_t d = 0; d < dv; ++d) part[d] += s[t - g0] * v[t][d];
      }
      CombineRow(dv, o, &gmx, &gsum, part.data(), mx, sum);
    }
    if (stats != nullptr) {
      stats[2 * i] = gmx, stats[2 * i + 1] = gsum;
    } else {
      for (int64_t d = 0; d < dv; ++d) o[d] /= gsum;
    }
  }
}

void AttendCombine(int64_t m, int64_t dv, int64_t n_parts, const float* const* parts, int64_t ldp,
                   const float* const* stats, float* out, int64_t ldo) {
  for (int64_t i = 0; i < m; ++i) {
    float* o = out + i * ldo;
    std::fill(o, o + dv, 0.0f);
    float mx = -std::numeric_limits<float>::infinity(), sum = 0.0f;
    for (int64_t j = 0; j < n_parts; ++j) {
      CombineRow(dv, o, &mx, &sum, parts[j] + i * ldp, stats[j][2 * i], stats[j][2 * i + 1]);
    }
    for (int64_t d = 0; d < dv; ++d) o[d] /= sum;
  }
}

// The rows widened to fp32 copies, then AttendRows.
void AttendRowsBf16(const float* qa, int64_t ldqa, const float* qb, int64_t ldqb, int64_t m,
                    int64_t da, int64_t db, const uint16_t* const* ka, const uint16_t* const* kb,
                    const uint16_t* const* v, int64_t dv, int64_t n, const int64_t* lim,
                    const uint64_t* mask, int64_t ldm, float scale, float* scratch, float* out,
                    int64_t ldo, float* stats) {
  const int64_t w = da + db + dv;
  std::vector<float> rows(n * w);
  std::vector<const float*> pa(n), pb(n), pv(n);
  for (int64_t t = 0; t < n; ++t) {
    float* r = rows.data() + t * w;
    for (int64_t d = 0; d < da; ++d) r[d] = Bf16ToF32(ka[t][d]);
    for (int64_t d = 0; d < db; ++d) r[da + d] = Bf16ToF32(kb[t][d]);
    for (int64_t d = 0; d < dv; ++d) r[da + db + d] = Bf16ToF32(v[t][d]);
    pa[t] = r, pb[t] = r + da, pv[t] = r + da + db;
  }
  AttendRows(qa, ldqa, qb, ldqb, m, da, db, pa.data(), pb.data(), pv.data(), dv, n, lim, mask, ldm,
             scale, scratch, out, ldo, stats);
}

void IndexerScores(const float* q, const float* w, int64_t hi, int64_t di, const float* panels,
                   int64_t n, float scale, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    float s = 0.0f;
    for (int64_t h = 0; h < hi; ++h) {
      float d = 0.0f;
      for (int64_t i = 0; i < di; ++i) d += q[h * di + i] * panels[IndexerPanelIndex(t, i, di)];
      s += w[h] * std::max(d * scale, 0.0f);
    }
    out[t] = s;
  }
}

// The panels widened to one fp32 panel set, then IndexerScores.
void IndexerScoresBf16(const float* q, const float* w, int64_t hi, int64_t di,
                       const uint16_t* const* panels, int64_t n, float scale, float* out) {
  const int64_t n_panels = (n + kIndexerPanel - 1) / kIndexerPanel, pf = kIndexerPanel * di;
  std::vector<float> wide(n_panels * pf);
  for (int64_t p = 0; p < n_panels; ++p) {
    for (int64_t i = 0; i < pf; ++i) wide[p * pf + i] = Bf16ToF32(panels[p][i]);
  }
  IndexerScores(q, w, hi, di, wide.data(), n, scale, out);
}

void TopKSet(const float* scores, int64_t n, int64_t k, int32_t* out, int32_t* scratch) {
  int32_t* order = scratch;
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return a < b;
  });
  std::copy(order, order + k, out);
  std::sort(out, out + k);
}

}  // namespace ref

namespace {

// Order-preserving map of a float to uint32: larger float → larger key, -0 and +0 the same key
// (they compare equal as floats, so they tie).
inline uint32_t SortKey(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
}

}  // namespace

void RadixTopKSet(const float* scores, int64_t n, int64_t k, int32_t* out, int32_t* scratch) {
  if (k <= 0) return;
  if (k >= n) {
    for (int64_t t = 0; t < n; ++t) out[t] = static_cast<int32_t>(t);
    return;
  }
  int32_t* hist = scratch;         // [2048]
  int32_t* cand = scratch + 2048;  // [n] positions still in the threshold's bucket
  int64_t n_cand = 0;
  uint32_t prefix = 0;  // the threshold key's bits decided so far
  int64_t need = k;     // how many of the candidates (at or above the threshold) to take
  constexpr int kShift[3] = {21, 10, 0};
  constexpr uint32_t kBits[3] = {11, 11, 10};
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = kShift[pass];
    const uint32_t mask = (1u << kBits[pass]) - 1;
    std::fill(hist, hist + (mask + 1), 0);
    const uint32_t high_mask = pass == 0 ? 0u : ~((1u << (shift + kBits[pass])) - 1);
    if (pass == 0) {
      for (int64_t t = 0; t < n; ++t) ++hist[(SortKey(scores[t]) >> shift) & mask];
    } else {
      for (int64_t j = 0; j < n_cand; ++j) ++hist[(SortKey(scores[cand[j]]) >> shift) & mask];
    }
    // The bucket holding the need-th largest candidate.
    int64_t above = 0;
    int32_t b = static_cast<int32_t>(mask);
    for (; b > 0 && above + hist[b] < need; --b) above += hist[b];
    need -= above;
    prefix |= static_cast<uint32_t>(b) << shift;
    const uint32_t keep_mask = high_mask | (mask << shift);
    // Candidates for the next pass: the keys in bucket b.
    int64_t nc = 0;
    if (pass == 0) {
      for (int64_t t = 0; t < n; ++t) {
        if ((SortKey(scores[t]) & keep_mask) == prefix) cand[nc++] = static_cast<int32_t>(t);
      }
    } else {
      for (int64_t j = 0; j < n_cand; ++j) {
        if ((SortKey(scores[cand[j]]) & keep_mask) == prefix) cand[nc++] = cand[j];
      }
    }
    n_cand = nc;
  }
  // `prefix` is now the k-th largest key; take every key above it and the first `need` equal
  // to it (ties: lower position first), in position order.
  int64_t o = 0;
  for (int64_t t = 0; t < n; ++t) {
    const uint32_t key = SortKey(scores[t]);
    if (key > prefix || (key == prefix && need-- > 0)) out[o++] = static_cast<int32_t>(t);
  }
}

}  // namespace mx
