// MXFP4 GEMM: every level against the scalar ref on fresh random weights and activations at
// many shapes (odd block counts, N not a multiple of anything), and the ref against float64
// math on the dequantized weights (the int8 activation rounding is the only error).
#include "kernels/mxfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
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

// Exponents uniform in [e_lo, e_hi]; with e_lo < 2 some block scales are fp32 subnormals.
Data Make(const Case& c, uint32_t seed, int e_lo = 120, int e_hi = 134) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), ex(e_lo, e_hi);
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

// The SIMD kernels step over 2 (AVX2) or 4 (AVX-512) blocks, scale groups of 8 / 16 blocks and
// row tiles of up to 4: block counts around those sizes, m = 1..9 rows, N odd.
std::vector<Case> Cases() {
  std::vector<Case> cases = {{1, 1, 32},    {1, 7, 64},     {1, 33, 96},   {2, 5, 288},
                             {3, 130, 256}, {7, 17, 544},   {1, 64, 1024}, {5, 3, 32},
                             {16, 40, 160}, {1, 257, 2048}, {1, 9, 6144}};
  const int64_t blocks[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 48};
  for (int64_t m = 1; m <= 9; ++m) {
    for (size_t b = m % 2; b < std::size(blocks); b += 2)
      cases.push_back({m, 2 * m + 1, 32 * blocks[b]});
  }
  return cases;
}

// |y − yr| <= kLevelTol · Σ|x·w| for every element (y from `what`).
void ExpectNearRef(const Case& c, const Data& d, const std::vector<float>& y,
                   const std::vector<float>& yr, const std::string& what) {
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double mag = 0;
      for (int64_t t = 0; t < c.k; ++t) mag += std::fabs(d.x[i * c.k + t] * d.w[j * c.k + t]);
      ASSERT_LE(std::fabs(y[i * c.n + j] - yr[i * c.n + j]), kLevelTol * mag + 1e-30)
          << what << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at (" << i << ", " << j
          << ")";
    }
  }
}

std::vector<BlockQ8> QuantizeRows(const Case& c, const Data& d) {
  std::vector<BlockQ8> xq(c.m * c.k / 32);
  for (int64_t i = 0; i < c.m; ++i)
    QuantizeRowQ8(d.x.data() + i * c.k, c.k, xq.data() + i * c.k / 32);
  return xq;
}

TEST(Mxfp4Gemm, LevelsMatchRef) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(c.m * 1000 + c.n * 10 + c.k));
    const std::vector<BlockQ8> xq = QuantizeRows(c, d);
    std::vector<float> yr(c.m * c.n, NAN);
    ref::GemmMxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), yr.data(), c.n, c.n, c.k, {});
    for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      ASSERT_NE(kt->gemm_mxfp4, nullptr);
      std::vector<float> y(c.m * c.n, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), y.data(), c.n, c.n, c.k, {});
      ExpectNearRef(c, d, y, yr, KernelLevelName(l));
    }
  }
}

// Block scales at the bottom of the E8M0 range (e = 0, 1 give the fp32 subnormals 2^-128,
// 2^-127 in the doubled table) against activations of 1e30, so that d · 2^(e−128) is a normal
// float and a wrong vector decoding of the small exponents would show.
TEST(Mxfp4Gemm, LevelsMatchRefWithTinyScales) {
  for (const Case& c : {Case{1, 9, 32 * 17}, Case{3, 5, 32 * 33}, Case{5, 7, 32 * 9}}) {
    Data d = Make(c, static_cast<uint32_t>(c.m + c.k), 0, 3);
    for (float& v : d.x) v *= 1e30f;
    const std::vector<BlockQ8> xq = QuantizeRows(c, d);
    std::vector<float> yr(c.m * c.n, NAN);
    ref::GemmMxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), yr.data(), c.n, c.n, c.k, {});
    for (float v : yr) ASSERT_TRUE(std::isnormal(v) || v == 0.0f) << v;
    for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> y(c.m * c.n, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), y.data(), c.n, c.n, c.k, {});
      ExpectNearRef(c, d, y, yr, KernelLevelName(l));
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
    const std::vector<BlockQ8> xq = QuantizeRows(c, d);
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

// A row alone, and a slice of W's rows into a strided output (as the threaded wrapper and the
// MoE experts call the kernels), give the same bits as the whole GEMM and write nothing else.
TEST(Mxfp4Gemm, RowAndColumnSlicesAreBitIdentical) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(5 * c.m + c.n + c.k));
    const std::vector<BlockQ8> xq = QuantizeRows(c, d);
    const int64_t nb = c.k / 32, c0 = c.n / 3, c1 = c.n - c.n / 4, ldy = c.n + 3;
    for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> y0(c.m * c.n, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.wq.data(), d.we.data(), y0.data(), c.n, c.n, c.k, {});
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> row(c.n, NAN);
        kt->gemm_mxfp4(xq.data() + i * nb, 1, d.wq.data(), d.we.data(), row.data(), c.n, c.n, c.k,
                       {});
        for (int64_t j = 0; j < c.n; ++j) {
          ASSERT_EQ(row[j], y0[i * c.n + j]) << KernelLevelName(l) << " m=" << c.m << " n=" << c.n
                                             << " k=" << c.k << " row " << i << " col " << j;
        }
      }
      std::vector<float> ys(c.m * ldy, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.wq.data() + c0 * (c.k / 2), d.we.data() + c0 * nb,
                     ys.data() + c0, ldy, c1 - c0, c.k, {});
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j >= c0 && j < c1) {
            ASSERT_EQ(ys[i * ldy + j], y0[i * c.n + j])
                << KernelLevelName(l) << " m=" << c.m << " n=" << c.n << " k=" << c.k;
          } else {
            ASSERT_TRUE(std::isnan(ys[i * ldy + j])) << "wrote outside the slice at " << j;
          }
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
