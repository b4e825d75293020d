// Kernel tests: every level in the table against float64 loops on fresh random inputs, with a
// named error budget per kernel, plus known answers for the tie rule and -inf handling.
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "base/cpu_features.h"
#include "base/numerics.h"
#include "kernels/kernels_avx512.h"

namespace mx {
namespace {

// Error budgets (max abs error vs float64, inputs ~N(0,1), K <= 512): fp32 accumulation of K
// products grows like sqrt(K)·2^-24·|x||w|.
constexpr double kGemmTol = 2e-4;
constexpr double kNormTol = 1e-5;
constexpr double kSoftmaxTol = 1e-6;
// A vector exp within a few ulp of std::exp: relative error of e.g. SwiGLU's SiLU.
constexpr double kExpRelTol = 1e-6;
// RoPE: two products of N(0,1)·[-1,1] and a sum, in fp32 (fused or not).
constexpr double kRopeTol = 1e-6;
// attend: scores are fp32 dots of ≤ 600 products of N(0,1)·N(0,1)/sqrt(d) scale, the output a
// convex combination of N(0,1) values.
constexpr double kAttendTol = 2e-5;

std::vector<float> Randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
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

TEST(Kernels, SelectReturnsACompiledLevel) {
  const KernelTable& kt = SelectKernels();
  EXPECT_EQ(GetKernelTable(kt.level), &kt);
  EXPECT_NE(GetKernelTable(KernelLevel::kRef), nullptr);
}

// The known-answer self-test SelectKernels runs passes at every level here, and names the
// entry of a table where one kernel is wrong.
TEST(Kernels, SelfTestPassesEveryLevelAndNamesABrokenEntry) {
  for (const KernelTable* kt : Levels()) {
    EXPECT_EQ(KernelSelfTest(*kt), "") << KernelLevelName(kt->level);
  }
  KernelTable broken = *GetKernelTable(KernelLevel::kRef);
  broken.softmax = [](float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / static_cast<float>(n);  // ignores the input
  };
  EXPECT_EQ(KernelSelfTest(broken), "softmax");
  broken = *GetKernelTable(KernelLevel::kRef);
  broken.topk = [](const float*, int64_t, int64_t k, int32_t* out) {
    for (int64_t i = 0; i < k; ++i) out[i] = static_cast<int32_t>(i);
  };
  EXPECT_EQ(KernelSelfTest(broken), "topk");
  broken = *GetKernelTable(KernelLevel::kRef);
  broken.gemm_bf16 = [](const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t,
                        int64_t, int64_t, GemmTiling) {};  // writes nothing: the NaN poison stays
  EXPECT_EQ(KernelSelfTest(broken), "gemm_bf16");
}

TEST(Kernels, GemmMatchesFloat64) {
  for (const KernelTable* kt : Levels()) {
    for (auto [m, n, k] : {std::tuple{1, 7, 13}, {5, 33, 64}, {9, 130, 257}, {3, 64, 512}}) {
      auto x = Randn(m * k, 1 + m);
      auto wf = Randn(n * k, 2 + n);
      std::vector<uint16_t> wb(n * k);
      for (size_t i = 0; i < wb.size(); ++i) wb[i] = F32ToBf16(wf[i]);
      std::vector<float> yb(m * n, NAN), yf(m * n, NAN);
      kt->gemm_bf16(x.data(), k, wb.data(), k, yb.data(), n, m, n, k, {});
      kt->gemm_f32(x.data(), k, wf.data(), k, yf.data(), n, m, n, k, {});
      double eb = 0, ef = 0;
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double sb = 0, sf = 0;
          for (int t = 0; t < k; ++t) {
            sb += double(x[i * k + t]) * Bf16ToF32(wb[j * k + t]);
            sf += double(x[i * k + t]) * wf[j * k + t];
          }
          eb = std::max(eb, std::abs(sb - yb[i * n + j]));
          ef = std::max(ef, std::abs(sf - yf[i * n + j]));
        }
      }
      EXPECT_LE(eb, kGemmTol) << KernelLevelName(kt->level) << " bf16 " << m << "x" << n << "x"
                              << k;
      EXPECT_LE(ef, kGemmTol) << KernelLevelName(kt->level) << " f32 " << m << "x" << n << "x" << k;
    }
  }
}

// Every fast kernel against its slow twin on fresh random inputs (STYLE.md 3).
TEST(Kernels, FastLevelsMatchRef) {
  const KernelTable& ref = *GetKernelTable(KernelLevel::kRef);
  const int m = 4, n = 37, k = 300;
  auto x = Randn(m * k, 11), wf = Randn(n * k, 12);
  std::vector<uint16_t> wb(n * k);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = F32ToBf16(wf[i]);
  std::vector<float> rb(m * n), rf(m * n), rn(k);
  ref.gemm_bf16(x.data(), k, wb.data(), k, rb.data(), n, m, n, k, {});
  ref.gemm_f32(x.data(), k, wf.data(), k, rf.data(), n, m, n, k, {});
  ref.rms_norm(x.data(), wf.data(), 1e-5f, k, rn.data());
  for (const KernelTable* kt : Levels()) {
    if (kt == &ref) continue;
    std::vector<float> yb(m * n, NAN), yf(m * n, NAN), yn(k, NAN);
    kt->gemm_bf16(x.data(), k, wb.data(), k, yb.data(), n, m, n, k, {});
    kt->gemm_f32(x.data(), k, wf.data(), k, yf.data(), n, m, n, k, {});
    kt->rms_norm(x.data(), wf.data(), 1e-5f, k, yn.data());
    for (int i = 0; i < m * n; ++i) {
      ASSERT_NEAR(yb[i], rb[i], kGemmTol) << KernelLevelName(kt->level);
      ASSERT_NEAR(yf[i], rf[i], kGemmTol) << KernelLevelName(kt->level);
    }
    for (int i = 0; i < k; ++i) ASSERT_NEAR(yn[i], rn[i], kNormTol) << KernelLevelName(kt->level);
  }
}

// Every tiling (gemm_tiling.h) only reorders the loops: each output keeps its accumulator and
// summation order, so the results are bit-identical to the default tiling at every shape,
// including row and column counts that leave partial tiles and blocks.
TEST(Kernels, GemmTilingsAreBitIdenticalToDefault) {
  for (const KernelTable* kt : Levels()) {
    for (auto [m, n, k] : {std::tuple{1, 9, 40}, {3, 17, 64}, {6, 33, 100}, {9, 130, 257}}) {
      auto x = Randn(m * k, 21 + m);
      auto wf = Randn(n * k, 22 + n);
      std::vector<uint16_t> wb(n * k);
      for (size_t i = 0; i < wb.size(); ++i) wb[i] = F32ToBf16(wf[i]);
      std::vector<float> db(m * n, NAN), df(m * n, NAN);
      kt->gemm_bf16(x.data(), k, wb.data(), k, db.data(), n, m, n, k, {});
      kt->gemm_f32(x.data(), k, wf.data(), k, df.data(), n, m, n, k, {});
      for (int mr : {1, 2, 4, 8}) {
        for (int nb : {0, 1, 5, 16}) {
          const GemmTiling t{.mr = mr, .nb = nb};
          std::vector<float> yb(m * n, NAN), yf(m * n, NAN);
          kt->gemm_bf16(x.data(), k, wb.data(), k, yb.data(), n, m, n, k, t);
          kt->gemm_f32(x.data(), k, wf.data(), k, yf.data(), n, m, n, k, t);
          EXPECT_EQ(yb, db) << KernelLevelName(kt->level) << " mr=" << mr << " nb=" << nb;
          EXPECT_EQ(yf, df) << KernelLevelName(kt->level) << " mr=" << mr << " nb=" << nb;
        }
      }
    }
  }
}

// The AVX-512 level takes the vdpbf16ps GEMM where the CPU has AVX512_BF16, and its activation
// split keeps the bits a plain bf16 rounding would drop: x = 1 + 2^-12 (bf16(x) = 1) times
// W = 1 summed over k must come out as k·(1 + 2^-12), not k.
TEST(Kernels, Avx512Bf16DotKeepsActivationBitsBeyondBf16) {
  const KernelTable* kt = GetKernelTable(KernelLevel::kAvx512);
  if (kt == nullptr || !GetCpuFeatures().avx512bf16) GTEST_SKIP() << "no AVX512_BF16 here";
  EXPECT_EQ(kt->gemm_bf16, &avx512::GemmBf16Dot);
  for (int64_t k : {1, 31, 32, 77, 1024}) {
    std::vector<float> x(k, 1.0f + 1.0f / 4096);
    std::vector<uint16_t> w(3 * k, F32ToBf16(1.0f));
    std::vector<float> y(3, NAN);
    kt->gemm_bf16(x.data(), k, w.data(), k, y.data(), 3, 1, 3, k, {});
    const double exact = static_cast<double>(k) * (1.0 + 1.0 / 4096);
    for (float v : y) EXPECT_NEAR(v, exact, k * std::ldexp(1.0, -20)) << "k=" << k;
  }
  // One product is exact: all 22 significant bits of x survive (two bf16 parts keep 16).
  const float x1 = 1.0f + std::ldexp(1.0f, -9) + std::ldexp(1.0f, -18) + std::ldexp(1.0f, -21);
  const uint16_t one = F32ToBf16(1.0f);
  float y1 = NAN;
  kt->gemm_bf16(&x1, 1, &one, 1, &y1, 1, 1, 1, 1, {});
  EXPECT_EQ(y1, x1);
}

// GemmActivations::kBf16 at every level: the float64 dot of bf16(x) (round-to-nearest-even) with
// W within kGemmTol, i.e. x really is rounded (x = 1 + 2^-12 gives exactly k, where kFp32 keeps
// k·(1 + 2^-12)); every tiling bit-identical, and a row's outputs the same alone or in a batch
// (so a request's tokens do not depend on what it is batched with).
TEST(Kernels, GemmBf16ActivationsRoundXAndAreBatchInvariant) {
  for (const KernelTable* base : Levels()) {
    const KernelTable& kt = WithGemmActivations(*base, GemmActivations::kBf16);
    ASSERT_EQ(kt.level, base->level);
    ASSERT_EQ(kt.bf16_activations, GemmActivations::kBf16);
    EXPECT_EQ(&WithGemmActivations(kt, GemmActivations::kFp32), base);
    EXPECT_EQ(KernelSelfTest(kt), "") << KernelLevelName(kt.level);
    const std::string lv = KernelLevelName(kt.level);
    for (auto [m, n, k] : {std::tuple{1, 7, 13}, {5, 33, 64}, {9, 130, 257}, {6, 40, 2048}}) {
      auto x = Randn(m * k, 31 + m);
      auto wf = Randn(n * k, 32 + n);
      std::vector<uint16_t> wb(n * k);
      for (size_t i = 0; i < wb.size(); ++i) wb[i] = F32ToBf16(wf[i]);
      std::vector<float> y(m * n, NAN);
      kt.gemm_bf16(x.data(), k, wb.data(), k, y.data(), n, m, n, k, {});
      double e = 0;
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double sum = 0;
          for (int t = 0; t < k; ++t) {
            sum += double(Bf16ToF32(F32ToBf16(x[i * k + t]))) * Bf16ToF32(wb[j * k + t]);
          }
          e = std::max(e, std::abs(sum - y[i * n + j]));
        }
      }
      EXPECT_LE(e, kGemmTol) << lv << " " << m << "x" << n << "x" << k;
      for (int mr : {1, 2, 4, 8}) {
        for (int nb : {0, 5, 16}) {
          std::vector<float> yt(m * n, NAN);
          kt.gemm_bf16(x.data(), k, wb.data(), k, yt.data(), n, m, n, k, {.mr = mr, .nb = nb});
          EXPECT_EQ(yt, y) << lv << " mr=" << mr << " nb=" << nb;
        }
      }
      for (int i = 0; i < m; ++i) {
        std::vector<float> row(n, NAN);
        kt.gemm_bf16(x.data() + i * k, k, wb.data(), k, row.data(), n, 1, n, k, {});
        EXPECT_TRUE(std::equal(row.begin(), row.end(), y.begin() + i * n)) << lv << " row " << i;
      }
    }
    for (int64_t k : {1, 31, 77, 1024}) {
      std::vector<float> x(k, 1.0f + 1.0f / 4096);
      std::vector<uint16_t> w(3 * k, F32ToBf16(1.0f));
      std::vector<float> y(3, NAN);
      kt.gemm_bf16(x.data(), k, w.data(), k, y.data(), 3, 1, 3, k, {});
      for (float v : y) EXPECT_EQ(v, static_cast<float>(k)) << lv << " k=" << k;
    }
  }
}

// Every level's attention against float64 on one cache of rows [ka | kb] (values = ka, as in
// MLA's absorbed form), over every position (dense) and over an index list with gaps (sparse).
TEST(Kernels, AttendMatchesFloat64DenseAndSparse) {
  for (auto [da, db, n_cache] : {std::tuple{512, 64, 300}, {32, 16, 7}, {40, 8, 65}, {1, 1, 1}}) {
    const int64_t w = da + db;
    auto cache = Randn(n_cache * w, 40 + da);
    auto q = Randn(w, 41 + da);
    const float scale = 1.0f / std::sqrt(static_cast<float>(w));
    std::vector<int64_t> dense(n_cache), sparse;
    for (int64_t t = 0; t < n_cache; ++t) {
      dense[t] = t;
      if (t % 3 != 1) sparse.push_back(t);
    }
    for (const auto* sel : {&dense, &sparse}) {
      const int64_t n = static_cast<int64_t>(sel->size());
      std::vector<const float*> ka(n), kb(n);
      for (int64_t i = 0; i < n; ++i) {
        ka[i] = cache.data() + (*sel)[i] * w;
        kb[i] = ka[i] + da;
      }
      // float64 reference
      std::vector<double> p(n), want(da, 0.0);
      double mx = -1e300, sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        double d = 0.0;
        for (int64_t j = 0; j < w; ++j) d += double(q[j]) * ka[i][j];
        p[i] = d * scale;
        mx = std::max(mx, p[i]);
      }
      for (auto& v : p) sum += (v = std::exp(v - mx));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < da; ++j) want[j] += p[i] / sum * ka[i][j];
      }
      for (const KernelTable* kt : Levels()) {
        std::vector<float> out(da, NAN), scratch(n, NAN);
        kt->attend(q.data(), q.data() + da, da, db, ka.data(), kb.data(), ka.data(), da, n, scale,
                   scratch.data(), out.data());
        double worst = 0.0;
        for (int64_t j = 0; j < da; ++j) {
          ASSERT_TRUE(std::isfinite(out[j]));
          worst = std::max(worst, std::fabs(out[j] - want[j]));
        }
        EXPECT_LE(worst, kAttendTol)
            << KernelLevelName(kt->level) << " da=" << da << " db=" << db << " n=" << n;
      }
    }
  }
}

TEST(Kernels, ThreadedGemmEqualsSingleThreadedAndPoisons) {
  const KernelTable& kt = *GetKernelTable(KernelLevel::kRef);
  ThreadPool one(1), four(4);
  const int m = 3, n = 200, k = 150;
  auto x = Randn(m * k, 7);
  auto w = Randn(n * k, 8);
  std::vector<float> a(m * n, 0), b(m * n, 0);
  GemmF32(kt, one, x.data(), m, k, w.data(), n, a.data());
  GemmF32(kt, four, x.data(), m, k, w.data(), n, b.data());
  EXPECT_EQ(a, b);
  for (float v : b) ASSERT_TRUE(std::isfinite(v));
}

TEST(Kernels, RmsNormMatchesFloat64) {
  for (const KernelTable* kt : Levels()) {
    const int n = 96;
    auto x = Randn(n, 3), w = Randn(n, 4);
    std::vector<float> y(n, NAN);
    kt->rms_norm(x.data(), w.data(), 1e-5f, n, y.data());
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], w[i] * x[i] * inv, kNormTol);
  }
}

TEST(Kernels, SoftmaxHandlesMinusInf) {
  for (const KernelTable* kt : Levels()) {
    auto x = Randn(20, 5);
    x[3] = -std::numeric_limits<float>::infinity();
    auto y = x;
    kt->softmax(y.data(), 20);
    double mx = -1e30, sum = 0;
    for (int i = 0; i < 20; ++i)
      if (i != 3) mx = std::max(mx, double(x[i]));
    for (int i = 0; i < 20; ++i)
      if (i != 3) sum += std::exp(x[i] - mx);
    for (int i = 0; i < 20; ++i) {
      const double want = i == 3 ? 0.0 : std::exp(x[i] - mx) / sum;
      EXPECT_NEAR(y[i], want, kSoftmaxTol);
    }
  }
}

TEST(Kernels, RopeInterleavedAndNeox) {
  for (const KernelTable* kt : Levels()) {
    std::vector<float> c = {std::cos(0.5f), std::cos(0.25f)}, s = {std::sin(0.5f), std::sin(0.25f)};
    std::vector<float> a = {1, 2, 3, 4};
    kt->rope(a.data(), 4, c.data(), s.data(), true);  // pairs (0,1), (2,3)
    EXPECT_NEAR(a[0], 1 * c[0] - 2 * s[0], 1e-6);
    EXPECT_NEAR(a[1], 1 * s[0] + 2 * c[0], 1e-6);
    EXPECT_NEAR(a[2], 3 * c[1] - 4 * s[1], 1e-6);
    EXPECT_NEAR(a[3], 3 * s[1] + 4 * c[1], 1e-6);
    std::vector<float> b = {1, 2, 3, 4};
    kt->rope(b.data(), 4, c.data(), s.data(), false);  // pairs (0,2), (1,3)
    EXPECT_NEAR(b[0], 1 * c[0] - 3 * s[0], 1e-6);
    EXPECT_NEAR(b[2], 1 * s[0] + 3 * c[0], 1e-6);
    EXPECT_NEAR(b[1], 2 * c[1] - 4 * s[1], 1e-6);
    EXPECT_NEAR(b[3], 2 * s[1] + 4 * c[1], 1e-6);
  }
}

TEST(Kernels, TopKTieRuleLowerIndexFirst) {
  for (const KernelTable* kt : Levels()) {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> s = {0, 2, 0, 5, 2, -inf, 0};
    std::vector<int32_t> out(5, -7);
    kt->topk(s.data(), 7, 5, out.data());
    EXPECT_EQ(out, (std::vector<int32_t>{3, 1, 4, 0, 2}));
  }
}

// The vector softmax / SwiGLU / RoPE / RMSNorm / top-k of each level against float64 (top-k:
// against ref, exactly) on fresh random inputs, at lengths that leave every kind of tail.
TEST(Kernels, ElementwiseKernelsMatchFloat64AtEveryLength) {
  const KernelTable& ref = *GetKernelTable(KernelLevel::kRef);
  std::mt19937 rng(77);
  for (const KernelTable* kt : Levels()) {
    const char* lv = KernelLevelName(kt->level);
    for (int64_t n : {1, 2, 15, 16, 17, 31, 33, 64, 100, 1000}) {
      // softmax over a wide range (scores up to ±40), with -inf entries where n allows
      auto x = Randn(n, 100 + n);
      for (auto& v : x) v *= 15.0f;
      if (n > 3) x[n / 2] = x[1] = -std::numeric_limits<float>::infinity();
      auto y = x;
      kt->softmax(y.data(), n);
      double mx = -1e300, sum = 0;
      for (float v : x) mx = std::max(mx, double(v));
      for (float v : x) sum += std::exp(double(v) - mx);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(y[i], std::exp(double(x[i]) - mx) / sum, kSoftmaxTol) << lv << " n=" << n;
      }
      // SwiGLU: gates across the whole exp range, relative error
      auto g = Randn(n, 200 + n), u = Randn(n, 300 + n);
      for (auto& v : g) v *= 30.0f;
      std::vector<float> o(n, NAN);
      kt->swiglu(g.data(), u.data(), n, o.data());
      for (int64_t i = 0; i < n; ++i) {
        const double want = g[i] / (1 + std::exp(-double(g[i]))) * u[i];
        ASSERT_NEAR(o[i], want, kExpRelTol * std::fabs(want) + 1e-30) << lv << " g=" << g[i];
      }
      // RMSNorm in place (y aliases x)
      auto r = Randn(n, 400 + n), w = Randn(n, 500 + n);
      double ss = 0;
      for (float v : r) ss += double(v) * v;
      const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
      auto rn = r;
      kt->rms_norm(rn.data(), w.data(), 1e-6f, n, rn.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(rn[i], w[i] * r[i] * inv, kNormTol) << lv;
      // RoPE, both layouts, d = 2n
      const int64_t d = 2 * n;
      auto q = Randn(d, 600 + n), ang = Randn(n, 700 + n);
      std::vector<float> c(n), sn(n);
      for (int64_t j = 0; j < n; ++j) c[j] = std::cos(ang[j]), sn[j] = std::sin(ang[j]);
      for (bool inter : {true, false}) {
        auto z = q;
        kt->rope(z.data(), d, c.data(), sn.data(), inter);
        for (int64_t j = 0; j < n; ++j) {
          const int64_t a = inter ? 2 * j : j, b = inter ? 2 * j + 1 : j + n;
          ASSERT_NEAR(z[a], double(q[a]) * c[j] - double(q[b]) * sn[j], kRopeTol) << lv;
          ASSERT_NEAR(z[b], double(q[a]) * sn[j] + double(q[b]) * c[j], kRopeTol) << lv;
        }
      }
    }
    // top-k: scores on a coarse grid (many ties), some -inf, every k, equal to ref exactly
    for (int64_t n : {1, 7, 16, 40, 257, 3000}) {
      std::uniform_int_distribution<int> grid(-20, 20);
      std::vector<float> s(n);
      for (auto& v : s) v = grid(rng) * 0.25f;
      for (int64_t i = 0; i < n; i += 11) s[i] = -std::numeric_limits<float>::infinity();
      for (int64_t k :
           {int64_t{1}, std::min<int64_t>(n, 2), std::min<int64_t>(n, 8), n / 2 + 1, n}) {
        std::vector<int32_t> want(k), got(k, -7);
        ref.topk(s.data(), n, k, want.data());
        kt->topk(s.data(), n, k, got.data());
        ASSERT_EQ(got, want) << lv << " n=" << n << " k=" << k;
      }
    }
  }
}

TEST(Kernels, SwiGluMatchesFormula) {
  for (const KernelTable* kt : Levels()) {
    auto g = Randn(33, 9), u = Randn(33, 10);
    std::vector<float> y(33, NAN);
    kt->swiglu(g.data(), u.data(), 33, y.data());
    for (int i = 0; i < 33; ++i)
      EXPECT_NEAR(y[i], g[i] / (1 + std::exp(-double(g[i]))) * u[i], 1e-6);
  }
}

}  // namespace
}  // namespace mx
