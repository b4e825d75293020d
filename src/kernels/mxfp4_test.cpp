// MXFP4 GEMM: every level against the scalar ref on fresh random weights and activations at
// many shapes (odd block counts, N not a multiple of anything), and the ref against float64
// math on the dequantized weights (the int8 activation rounding is the only error).
#include "kernels/mxfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx {
namespace {

// |kernel − ref| <= kLevelTol · Σ|terms| (fp32 summation order only).
constexpr double kLevelTol = 1e-5;
// |ref − exact| <= kQ8Tol · sqrt(Σ (w·amax_block)²): int8 rounding, ≤ amax/254 per element.
constexpr double kQ8Tol = 0.02;

struct Case {
  int64_t m, n, k;
};

struct Data {
  std::vector<float> x;     // [m, k]
  std::vector<uint8_t> wq;  // [n, k/2] split-half
  std::vector<uint8_t> we;  // [n, k/32]
  std::vector<float> w;     // [n, k] dequantized
};

Data Make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), ex(120, 134);
  Data d;
  d.x.resize(c.m * c.k);
  for (auto& v : d.x) v = nd(rng);
  d.wq.resize(c.n * c.k / 2);
  for (auto& v : d.wq) v = static_cast<uint8_t>(byte(rng));
  d.we.resize(c.n * c.k / 32);
  for (auto& v : d.we) v = static_cast<uint8_t>(ex(rng));
  d.w.resize(c.n * c.k);
  for (int64_t j = 0; j < c.n; ++j) {
    for (int64_t b = 0; b < c.k / 32; ++b) {
      const float X = E8M0ToF32(d.we[j * (c.k / 32) + b]);
      for (int t = 0; t < 16; ++t) {
        const uint8_t q = d.wq[j * (c.k / 2) + b * 16 + t];
        d.w[j * c.k + b * 32 + t] = E2M1ToF32(q & 0xf) * X;
        d.w[j * c.k + b * 32 + t + 16] = E2M1ToF32(q >> 4) * X;
      }
    }
  }
  return d;
}

std::vector<Case> Cases() {
  return {{1, 1, 32},   {1, 7, 64},    {1, 33, 96}, {2, 5, 288},   {3, 130, 256},
          {7, 17, 544}, {1, 64, 1024}, {5, 3, 32},  {16, 40, 160}, {1, 257, 2048}};
}

TEST(Mxfp4Gemm, LevelsMatchRef) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(c.m * 1000 + c.n * 10 + c.k));
    std::vector<BlockQ8> xq(c.m * c.k / 32);
    for (int64_t i = 0; i < c.m; ++i)
      QuantizeRowQ8(d.x.data() + i * c.k, c.k, xq.data() + i * c.k / 32);
    std::vector<float> yr(c.m * c.n, NAN);
    ref::GemmMxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), yr.data(), c.n, c.n, c.k, {});
    for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      ASSERT_NE(kt->gemm_mxfp4, nullptr);
      std::vector<float> y(c.m * c.n, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), y.data(), c.n, c.n, c.k, {});
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double mag = 0;
          for (int64_t t = 0; t < c.k; ++t) mag += std::fabs(d.x[i * c.k + t] * d.w[j * c.k + t]);
          ASSERT_LE(std::fabs(y[i * c.n + j] - yr[i * c.n + j]), kLevelTol * mag + 1e-30)
              << KernelLevelName(l) << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at (" << i
              << ", " << j << ")";
        }
      }
    }
  }
}

TEST(Mxfp4Gemm, RefMatchesDequantizedFloat64) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(7 + c.m + c.n + c.k));
    std::vector<BlockQ8> xq(c.m * c.k / 32);
    for (int64_t i = 0; i < c.m; ++i)
      QuantizeRowQ8(d.x.data() + i * c.k, c.k, xq.data() + i * c.k / 32);
    std::vector<float> y(c.m * c.n, NAN);
    ref::GemmMxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), y.data(), c.n, c.n, c.k, {});
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double exact = 0, budget = 0;
        for (int64_t t = 0; t < c.k; ++t) {
          exact += double(d.x[i * c.k + t]) * d.w[j * c.k + t];
          const double amax = xq[i * c.k / 32 + t / 32].d * 127.0;
          budget += (d.w[j * c.k + t] * amax) * (d.w[j * c.k + t] * amax);
        }
        ASSERT_LE(std::fabs(y[i * c.n + j] - exact), kQ8Tol * std::sqrt(budget) + 1e-30)
            << "m=" << c.m << " n=" << c.n << " k=" << c.k;
      }
    }
  }
}

// Row tiles and column blocks (gemm_tiling.h) reorder loops only: bit-identical to the default.
TEST(Mxfp4Gemm, TilingsAreBitIdenticalToDefault) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(3 * c.m + c.n + c.k));
    std::vector<BlockQ8> xq(c.m * c.k / 32);
    for (int64_t i = 0; i < c.m; ++i)
      QuantizeRowQ8(d.x.data() + i * c.k, c.k, xq.data() + i * c.k / 32);
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      const GemmMxfp4Fn fn = kt->gemm_mxfp4 != nullptr ? kt->gemm_mxfp4 : ref::GemmMxfp4;
      std::vector<float> y0(c.m * c.n, NAN);
      fn(xq.data(), c.m, d.wq.data(), d.we.data(), y0.data(), c.n, c.n, c.k, {});
      for (int mr : {1, 2, 4}) {
        for (int nb : {0, 1, 6, 32}) {
          std::vector<float> y(c.m * c.n, NAN);
          fn(xq.data(), c.m, d.wq.data(), d.we.data(), y.data(), c.n, c.n, c.k,
             GemmTiling{.mr = mr, .nb = nb});
          ASSERT_EQ(y, y0) << KernelLevelName(l) << " m=" << c.m << " n=" << c.n << " k=" << c.k
                           << " mr=" << mr << " nb=" << nb;
        }
      }
    }
  }
}

TEST(Mxfp4Gemm, ThreadedWrapperWritesEveryElement) {
  const Case c{3, 301, 320};
  const Data d = Make(c, 99);
  ThreadPool pool(3);
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* kt = GetKernelTable(l);
    if (kt == nullptr) continue;
    std::vector<float> y(c.m * c.n), y1(c.m * c.n);
    GemmMxfp4(*kt, pool, d.x.data(), c.m, c.k, d.wq.data(), d.we.data(), c.n, y.data());
    ThreadPool one(1);
    GemmMxfp4(*kt, one, d.x.data(), c.m, c.k, d.wq.data(), d.we.data(), c.n, y1.data());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      EXPECT_EQ(y[i], y1[i]) << i;
    }
  }
}

TEST(Mxfp4Gemm, E8M0HalfKnownAnswers) {
  EXPECT_EQ(E8M0Half(128), 1.0f);
  EXPECT_EQ(E8M0Half(127), 0.5f);
  EXPECT_EQ(E8M0Half(2), std::ldexp(1.0f, -126));
  EXPECT_EQ(E8M0Half(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(E8M0Half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(E8M0Half(254), std::ldexp(1.0f, 126));
  for (int e = 0; e < 255; ++e) EXPECT_EQ(E8M0Half(uint8_t(e)) * 2, E8M0ToF32(uint8_t(e))) << e;
}

TEST(Mxfp4Gemm, QuantizeRowQ8KnownAnswer) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.27f;
  x[1] = -0.635f;
  x[2] = 0.004f;
  BlockQ8 b;
  QuantizeRowQ8(x.data(), 32, &b);
  EXPECT_FLOAT_EQ(b.d, 0.01f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], -64);  // -63.5 → round half to even
  EXPECT_EQ(b.qs[2], 0);
  EXPECT_EQ(b.sum, 63);
}

}  // namespace
}  // namespace mx
