// The attention and indexer kernels (attention_kernels.h) at every compiled level against
// float64 formulas and the ref twin, on fresh random inputs (the seed is printed on failure).
// Tolerances: kRowsTol 5e-5 max abs on attention outputs (|out| ≲ 3; fp32 dot products of up to
// 576 terms and a blockwise softmax in another order); kScoreTol 2e-5 relative on indexer
// scores (fp32 sums of 128-term dot products). Top-k sets and batch independence are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/numerics.h"
#include "kernels/attention_kernels.h"
#include "kernels/kernels.h"

namespace mx::attention_kernels_test {
namespace {

constexpr double kRowsTol = 5e-5;
constexpr double kScoreTol = 2e-5;

uint32_t FreshSeed() { return std::random_device{}(); }

std::vector<float> Randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<const KernelTable*> Levels() {
  std::vector<const KernelTable*> out;
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (const KernelTable* t = GetKernelTable(l)) out.push_back(t);
  }
  return out;
}

// Row i attends keys t < 1 + (53·i + 7) mod n: limits spread over 1..n.
std::vector<int64_t> SpreadLimits(int64_t m, int64_t n) {
  std::vector<int64_t> lim(m);
  for (int64_t i = 0; i < m; ++i) lim[i] = 1 + (i * 53 + 7) % n;
  return lim;
}

// Per row, a mask (words of (n + 63) / 64) of about half the keys, key 0 always.
std::vector<uint64_t> HalfMasks(int64_t m, int64_t n, std::mt19937& rng) {
  const int64_t ldm = (n + 63) / 64;
  std::vector<uint64_t> mask(m * ldm, 0);
  std::bernoulli_distribution pick(0.5);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t t = 0; t < n; ++t) {
      if (t == 0 || pick(rng)) mask[i * ldm + t / 64] |= uint64_t{1} << (t % 64);
    }
  }
  return mask;
}

// n random key rows [da | db | dv] rounded to bf16, by pointers in reverse order (any pointers
// work): ka / kb / v into the rows widened to fp32, ha / hb / hv into the bf16 rows.
struct Bf16Rows {
  std::vector<uint16_t> h;
  std::vector<float> wide;
  std::vector<const float*> ka, kb, v;
  std::vector<const uint16_t*> ha, hb, hv;
  Bf16Rows(int64_t n, int64_t da, int64_t db, int64_t dv, std::mt19937& rng)
      : ka(n), kb(n), v(n), ha(n), hb(n), hv(n) {
    const int64_t w = da + db + dv;
    const auto f = Randn(n * w, rng);
    h.resize(f.size());
    wide.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = F32ToBf16(f[i]), wide[i] = Bf16ToF32(h[i]);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t r = (n - 1 - t) * w;
      ka[t] = wide.data() + r, kb[t] = ka[t] + da, v[t] = kb[t] + db;
      ha[t] = h.data() + r, hb[t] = ha[t] + da, hv[t] = hb[t] + db;
    }
  }
};

struct RowsCase {
  int64_t m, da, db, dv, n;
  bool causal;  // lim[i] = n - m + i + 1 (a chunk's queries over its prefix), else lim = n
  bool masked;  // each row attends a random ~40% of its keys (always key 0)
};

// One case: m rows (qa, qb interleaved at a stride wider than da + db), keys scattered in a
// cache by row pointers, out at a stride wider than dv.
TEST(AttentionKernels, AttendRowsMatchesFloat64AtEveryLevel) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  const RowsCase cases[] = {
      {16, 512, 64, 512, 300, false, false}, {37, 192, 64, 128, 200, true, false},
      {5, 20, 7, 21, 70, true, false},       {3, 33, 1, 65, 129, false, false},
      {1, 1, 1, 1, 1, false, false},         {9, 16, 16, 16, 9, true, false},
      {37, 192, 64, 128, 300, true, true},   {16, 512, 64, 512, 200, false, true},
      {4, 9, 3, 5, 130, true, true},         {16, 512, 64, 512, 1100, false, false},
      {8, 64, 16, 40, 1300, true, true},     {3, 24, 8, 17, 1024, false, true}};
  for (const RowsCase& c : cases) {
    const int64_t ldq = c.da + c.db + 3, ldo = c.dv + 5, w = c.da + c.db + c.dv;
    const auto q = Randn(c.m * ldq, rng);
    const auto cache = Randn(c.n * 2 * w, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.da + c.db));
    std::vector<const float*> ka(c.n), kb(c.n), v(c.n);
    for (int64_t t = 0; t < c.n; ++t) {  // every other cache row, in reverse: any pointers
      ka[t] = cache.data() + (2 * (c.n - 1 - t)) * w;
      kb[t] = ka[t] + c.da;
      v[t] = kb[t] + c.db;
    }
    std::vector<int64_t> lim(c.m);
    for (int64_t i = 0; i < c.m; ++i) lim[i] = c.causal ? c.n - c.m + i + 1 : c.n;
    const int64_t ldm = (c.n + 63) / 64 + 1;
    std::vector<uint64_t> mask(c.m * ldm, 0);
    std::bernoulli_distribution pick(0.4);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t t = 0; t < c.n; ++t) {
        if (t == 0 || pick(rng)) mask[i * ldm + t / 64] |= uint64_t{1} << (t % 64);
      }
    }
    auto on = [&](int64_t i, int64_t t) {
      return !c.masked || (mask[i * ldm + t / 64] >> (t % 64) & 1) != 0;
    };
    // float64 formula
    std::vector<double> want(c.m * c.dv);
    for (int64_t i = 0; i < c.m; ++i) {
      std::vector<double> p(lim[i]);
      double mx = -1e300, sum = 0;
      for (int64_t t = 0; t < lim[i]; ++t) {
        if (!on(i, t)) {
          p[t] = -1e300;
          continue;
        }
        double d = 0;
        for (int64_t j = 0; j < c.da; ++j) d += double(q[i * ldq + j]) * ka[t][j];
        for (int64_t j = 0; j < c.db; ++j) d += double(q[i * ldq + c.da + j]) * kb[t][j];
        mx = std::max(mx, p[t] = d * scale);
      }
      for (auto& x : p) sum += (x = x == -1e300 ? 0.0 : std::exp(x - mx));
      for (int64_t t = 0; t < lim[i]; ++t) {
        for (int64_t d = 0; d < c.dv; ++d) want[i * c.dv + d] += p[t] / sum * v[t][d];
      }
    }
    for (const KernelTable* kt : Levels()) {
      std::vector<float> out(c.m * ldo, std::numeric_limits<float>::quiet_NaN());
      std::vector<float> scratch(AttendRowsScratch(c.m, c.dv));
      kt->attend_rows(q.data(), ldq, q.data() + c.da, ldq, c.m, c.da, c.db, ka.data(), kb.data(),
                      v.data(), c.dv, c.n, c.causal ? lim.data() : nullptr,
                      c.masked ? mask.data() : nullptr, ldm, scale, scratch.data(), out.data(), ldo,
                      nullptr);
      double e = 0;
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t d = 0; d < c.dv; ++d) {
          const double x = out[i * ldo + d];
          e = std::isfinite(x) ? std::max(e, std::fabs(x - want[i * c.dv + d])) : 1e30;
        }
        for (int64_t d = c.dv; d < ldo && i + 1 < c.m; ++d) {
          EXPECT_TRUE(std::isnan(out[i * ldo + d])) << "wrote past dv";
        }
      }
      EXPECT_LE(e, kRowsTol) << KernelLevelName(kt->level) << " m=" << c.m << " da=" << c.da
                             << " n=" << c.n << " masked=" << c.masked << " seed=" << seed;
    }
  }
}

// A row's output is the same bits whichever rows share the call (so a query gives the same
// result alone, in a batch, or in another chunking).
TEST(AttentionKernels, AttendRowsRowIsIndependentOfItsNeighbours) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  constexpr int64_t m = 11, da = 48, db = 16, dv = 40, n = 1150;  // limits over 3 segments
  const auto q = Randn(m * (da + db), rng), cache = Randn(n * (da + db + dv), rng);
  std::vector<const float*> ka(n), kb(n), v(n);
  for (int64_t t = 0; t < n; ++t) {
    ka[t] = cache.data() + t * (da + db + dv), kb[t] = ka[t] + da, v[t] = kb[t] + db;
  }
  std::vector<int64_t> lim(m);
  for (int64_t i = 0; i < m; ++i) lim[i] = 1 + (i * 337) % n;
  constexpr int64_t ldm = (n + 63) / 64;
  std::vector<uint64_t> mask(m * ldm, 0);  // random ~half of the keys, always key 0
  std::bernoulli_distribution pick(0.5);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t t = 0; t < n; ++t) {
      if (t == 0 || pick(rng)) mask[i * ldm + t / 64] |= uint64_t{1} << (t % 64);
    }
  }
  for (const KernelTable* kt : Levels()) {
    for (bool masked : {false, true}) {
      std::vector<float> all(m * dv), one(dv), scratch(AttendRowsScratch(m, dv));
      kt->attend_rows(q.data(), da + db, q.data() + da, da + db, m, da, db, ka.data(), kb.data(),
                      v.data(), dv, n, lim.data(), masked ? mask.data() : nullptr, ldm, 0.2f,
                      scratch.data(), all.data(), dv, nullptr);
      for (int64_t i = 0; i < m; ++i) {
        const float* qi = q.data() + i * (da + db);
        kt->attend_rows(qi, da + db, qi + da, da + db, 1, da, db, ka.data(), kb.data(), v.data(),
                        dv, lim[i], nullptr, masked ? mask.data() + i * ldm : nullptr, ldm, 0.2f,
                        scratch.data(), one.data(), dv, nullptr);
        EXPECT_EQ(one, std::vector<float>(all.begin() + i * dv, all.begin() + (i + 1) * dv))
            << KernelLevelName(kt->level) << " row " << i << " masked " << masked
            << " seed=" << seed;
      }
    }
  }
}

// attend_rows_bf16 over bf16 rows gives attend_rows' bits over the same rows widened to fp32
// (the widening is exact and the arithmetic the same), at every level in both activation tables
// (the bf16 one is the engine's), with limits, masks, tails of every width (da, db, dv not
// multiples of a vector) and keys by arbitrary pointers.
TEST(AttentionKernels, AttendRowsOverBf16RowsEqualsTheWidenedRows) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  struct Shape {
    int64_t m, da, db, dv, n;
  };
  for (const Shape& sh : {Shape{16, 512, 64, 512, 300}, Shape{5, 37, 11, 29, 70},
                          Shape{1, 192, 64, 128, 65}, Shape{33, 24, 8, 40, 129}}) {
    const auto q = Randn(sh.m * (sh.da + sh.db), rng);
    const Bf16Rows rows(sh.n, sh.da, sh.db, sh.dv, rng);
    const auto &ka = rows.ka, &kb = rows.kb, &v = rows.v;
    const auto &ha = rows.ha, &hb = rows.hb, &hv = rows.hv;
    const std::vector<int64_t> lim = SpreadLimits(sh.m, sh.n);
    const int64_t ldm = (sh.n + 63) / 64;
    const std::vector<uint64_t> mask = HalfMasks(sh.m, sh.n, rng);
    for (const KernelTable* base : Levels()) {
      for (auto [masked, act] : {std::pair{false, GemmActivations::kFp32},
                                 {true, GemmActivations::kFp32},
                                 {false, GemmActivations::kBf16},
                                 {true, GemmActivations::kBf16}}) {
        const KernelTable* kt = &WithGemmActivations(*base, act);
        const uint64_t* mk = masked ? mask.data() : nullptr;
        std::vector<float> want(sh.m * sh.dv, std::numeric_limits<float>::quiet_NaN());
        std::vector<float> got(want), scratch(AttendRowsScratch(sh.m, sh.dv));
        kt->attend_rows(q.data(), sh.da + sh.db, q.data() + sh.da, sh.da + sh.db, sh.m, sh.da,
                        sh.db, ka.data(), kb.data(), v.data(), sh.dv, sh.n, lim.data(), mk, ldm,
                        0.1f, scratch.data(), want.data(), sh.dv, nullptr);
        kt->attend_rows_bf16(q.data(), sh.da + sh.db, q.data() + sh.da, sh.da + sh.db, sh.m, sh.da,
                             sh.db, ha.data(), hb.data(), hv.data(), sh.dv, sh.n, lim.data(), mk,
                             ldm, 0.1f, scratch.data(), got.data(), sh.dv, nullptr);
        for (float x : got) ASSERT_TRUE(std::isfinite(x)) << KernelLevelName(kt->level);
        ASSERT_EQ(got, want) << KernelLevelName(kt->level) << " m=" << sh.m << " da=" << sh.da
                             << " masked=" << masked
                             << " bf16 activations=" << (act == GemmActivations::kBf16)
                             << " seed=" << seed;
      }
    }
  }
}

// A key set attended in parts (keys [j·kAttendSegment, (j + 1)·kAttendSegment), each call with
// stats) and the parts combined by attend_combine gives the bits of one call over every key, at
// every level, over fp32 and bf16 rows, with and without masks: a query's keys split between
// threads give the output of the query attended alone. Row 0 attends no key of part 1 (its
// part is empty, max -inf) and row 1 only key 0 of the set.
TEST(AttentionKernels, PartsCombinedEqualOneCallOverEveryKey) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  constexpr int64_t G = kAttendSegment;
  struct Shape {
    int64_t m, da, db, dv, n;
  };
  for (const Shape& sh : {Shape{16, 512, 64, 512, 3 * G - 37}, Shape{5, 37, 11, 29, 2 * G},
                          Shape{3, 24, 8, 40, G + 1}, Shape{4, 20, 4, 16, G}}) {
    const int64_t ldq = sh.da + sh.db;
    const auto q = Randn(sh.m * ldq, rng);
    const Bf16Rows rows(sh.n, sh.da, sh.db, sh.dv, rng);
    const auto &ka = rows.ka, &kb = rows.kb, &v = rows.v;
    const auto &ha = rows.ha, &hb = rows.hb, &hv = rows.hv;
    const int64_t ldm = (sh.n + 63) / 64;
    std::vector<uint64_t> mask = HalfMasks(sh.m, sh.n, rng);
    for (int64_t t = G; t < std::min(2 * G, sh.n); ++t) mask[t / 64] &= ~(uint64_t{1} << (t % 64));
    if (sh.m > 1) {
      std::fill(mask.begin() + ldm, mask.begin() + 2 * ldm, 0);
      mask[ldm] = 1;
    }
    const int64_t n_parts = (sh.n + G - 1) / G;
    for (const KernelTable* kt : Levels()) {
      for (const bool masked : {false, true}) {
        for (const bool bf16 : {false, true}) {
          auto attend = [&](int64_t k0, int64_t n, float* out, int64_t ldo, float* stats) {
            std::vector<float> scratch(AttendRowsScratch(sh.m, sh.dv));
            const uint64_t* mk = masked ? mask.data() + k0 / 64 : nullptr;
            if (bf16) {
              kt->attend_rows_bf16(q.data(), ldq, q.data() + sh.da, ldq, sh.m, sh.da, sh.db,
                                   ha.data() + k0, hb.data() + k0, hv.data() + k0, sh.dv, n,
                                   nullptr, mk, ldm, 0.1f, scratch.data(), out, ldo, stats);
            } else {
              kt->attend_rows(q.data(), ldq, q.data() + sh.da, ldq, sh.m, sh.da, sh.db,
                              ka.data() + k0, kb.data() + k0, v.data() + k0, sh.dv, n, nullptr, mk,
                              ldm, 0.1f, scratch.data(), out, ldo, stats);
            }
          };
          const float nan = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> want(sh.m * sh.dv, nan), got(want);
          attend(0, sh.n, want.data(), sh.dv, nullptr);
          std::vector<float> parts(n_parts * sh.m * sh.dv, nan), stats(n_parts * sh.m * 2, nan);
          std::vector<const float*> pp(n_parts), ps(n_parts);
          for (int64_t j = 0; j < n_parts; ++j) {
            pp[j] = parts.data() + j * sh.m * sh.dv, ps[j] = stats.data() + j * sh.m * 2;
            attend(j * G, std::min(G, sh.n - j * G), parts.data() + j * sh.m * sh.dv, sh.dv,
                   stats.data() + j * sh.m * 2);
          }
          kt->attend_combine(sh.m, sh.dv, n_parts, pp.data(), sh.dv, ps.data(), got.data(), sh.dv);
          for (float x : want) ASSERT_TRUE(std::isfinite(x)) << KernelLevelName(kt->level);
          ASSERT_EQ(got, want) << KernelLevelName(kt->level) << " n=" << sh.n
                               << " masked=" << masked << " bf16=" << bf16 << " seed=" << seed;
          if (masked && n_parts > 1) {
            EXPECT_EQ(stats[sh.m * 2], -std::numeric_limits<float>::infinity())
                << "row 0 attends no key of part 1";
          }
        }
      }
    }
  }
}

TEST(AttentionKernels, IndexerScoresMatchFloat64AtEveryLevel) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  for (auto [hi, di, n] : {std::tuple<int64_t, int64_t, int64_t>{8, 128, 1000},
                           {3, 20, 37},
                           {1, 1, 1},
                           {5, 64, 32},
                           {8, 128, 17}}) {
    const auto q = Randn(hi * di, rng), w = Randn(hi, rng), keys = Randn(n * di, rng);
    std::vector<float> panels(IndexerPanelFloats(n, di), 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t d = 0; d < di; ++d) panels[IndexerPanelIndex(t, d, di)] = keys[t * di + d];
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(di));
    std::vector<double> want(n);
    double norm = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < hi; ++h) {
        double d = 0;
        for (int64_t i = 0; i < di; ++i) d += double(q[h * di + i]) * keys[t * di + i];
        want[t] += w[h] * std::max(d * scale, 0.0);
        norm = std::max(norm, std::fabs(w[h] * d * scale));
      }
    }
    for (const KernelTable* kt : Levels()) {
      std::vector<float> out(n + 1, std::numeric_limits<float>::quiet_NaN());
      kt->indexer_scores(q.data(), w.data(), hi, di, panels.data(), n, scale, out.data());
      double e = 0;
      for (int64_t t = 0; t < n; ++t) {
        e = std::isfinite(out[t]) ? std::max(e, std::fabs(out[t] - want[t])) : 1e30;
      }
      EXPECT_TRUE(std::isnan(out[n])) << "wrote past n";
      EXPECT_LE(e, kScoreTol * (1 + norm))
          << KernelLevelName(kt->level) << " n=" << n << " seed=" << seed;
    }
  }
}

// The radix select gives exactly the partial sort's set: many ties (rounded scores), negative
// and positive values, ±0, k = 1, k = n, long rows.
// indexer_scores_bf16 over bf16 panels at scattered addresses gives indexer_scores' bits over
// the same panels widened to fp32, at every level, n not a multiple of the panel width.
TEST(AttentionKernels, IndexerScoresOverBf16PanelsEqualTheWidenedPanels) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  for (const int64_t n : {1, 16, 37, 300}) {
    constexpr int64_t hi = 8, di = 128;
    const int64_t n_panels = (n + kIndexerPanel - 1) / kIndexerPanel, pf = kIndexerPanel * di;
    const auto q = Randn(hi * di, rng), w = Randn(hi, rng), f = Randn(n_panels * pf, rng);
    std::vector<uint16_t> h(f.size());
    std::vector<float> wide(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = F32ToBf16(f[i]), wide[i] = Bf16ToF32(h[i]);
    // The bf16 panels in reverse order in memory, reached through pointers.
    std::vector<uint16_t> scattered(h.size());
    std::vector<const uint16_t*> ptr(n_panels);
    for (int64_t p = 0; p < n_panels; ++p) {
      const int64_t at = (n_panels - 1 - p) * pf;
      std::copy_n(h.begin() + p * pf, pf, scattered.begin() + at);
      ptr[p] = scattered.data() + at;
    }
    for (const KernelTable* kt : Levels()) {
      std::vector<float> want(n, std::numeric_limits<float>::quiet_NaN()), got(want);
      kt->indexer_scores(q.data(), w.data(), hi, di, wide.data(), n, 0.09f, want.data());
      kt->indexer_scores_bf16(q.data(), w.data(), hi, di, ptr.data(), n, 0.09f, got.data());
      for (float x : got) ASSERT_TRUE(std::isfinite(x)) << KernelLevelName(kt->level);
      ASSERT_EQ(got, want) << KernelLevelName(kt->level) << " n=" << n << " seed=" << seed;
    }
  }
}

TEST(AttentionKernels, TopKSetEqualsThePartialSortsSetAtEveryLevel) {
  const uint32_t seed = FreshSeed();
  std::mt19937 rng(seed);
  const KernelTable& ref = *GetKernelTable(KernelLevel::kRef);
  for (auto [n, k, ties] : {std::tuple<int64_t, int64_t, bool>{1, 1, false},
                            {70, 9, true},
                            {4096, 2048, false},
                            {4096, 2048, true},
                            {5000, 1, true},
                            {3000, 3000, false},
                            {2049, 2048, true},
                            {100000, 2048, false}}) {
    auto s = Randn(n, rng, 3.0f);
    if (ties) {
      for (auto& x : s) x = std::round(x);  // ~15 distinct values
    }
    s[0] = -0.0f;
    if (n > 1) s[n - 1] = 0.0f;
    std::vector<int32_t> want(k), scratch(TopKSetScratch(n));
    ref.topk_set(s.data(), n, k, want.data(), scratch.data());
    ASSERT_TRUE(std::is_sorted(want.begin(), want.end()));
    for (const KernelTable* kt : Levels()) {
      std::vector<int32_t> got(k, -1);
      kt->topk_set(s.data(), n, k, got.data(), scratch.data());
      EXPECT_EQ(got, want) << KernelLevelName(kt->level) << " n=" << n << " k=" << k
                           << " seed=" << seed;
    }
  }
}

}  // namespace
}  // namespace mx::attention_kernels_test
