// FP8 block-scaled GEMM: every level against the scalar ref on fresh random weights, scales and
// activations at many shapes (N and K not multiples of 128 or of any vector: partial blocks
// and tails), the ref against float64 math on the dequantized weights, every e4m3 code
// (subnormals, -0, NaN), bit-identical tilings and slices, and the threaded wrapper.
#include "kernels/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx::fp8_test {
namespace {

// |kernel − ref| <= kLevelTol · Σ|x·w| (fp32 summation order only; the dequantized weights
// are the same bits at every level).
constexpr double kLevelTol = 1e-5;

struct Case {
  int64_t m, n, k;
};

struct Data {
  std::vector<float> x;    // [m, k]
  std::vector<uint8_t> w;  // [n, k] e4m3
  std::vector<float> s;    // [ceil(n/128), ceil(k/128)]
};

// Random codes (no NaN codes), scales log-uniform in [2^-12, 2^-4] with a random sign.
Data Make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> ex(-12.0f, -4.0f);
  Data d;
  d.x.resize(c.m * c.k);
  for (auto& v : d.x) v = nd(rng);
  d.w.resize(c.n * c.k);
  for (auto& v : d.w) {
    do v = static_cast<uint8_t>(byte(rng));
    while ((v & 0x7f) == 0x7f);
  }
  d.s.resize(Fp8ScaleCols(c.n) * Fp8ScaleCols(c.k));
  for (auto& v : d.s) v = std::exp2(ex(rng)) * (byte(rng) < 16 ? -1.0f : 1.0f);
  return d;
}

// W[j, t] dequantized as the contract says: fp32(e4m3 · scale), W's row 0 at `phase`.
float Dq(const Data& d, const Case& c, int64_t j, int64_t t, int64_t phase = 0) {
  return Fp8E4M3FnToF32(d.w[j * c.k + t]) *
         d.s[(phase + j) / kFp8Block * Fp8ScaleCols(c.k) + t / kFp8Block];
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {{1, 1, 1},     {1, 7, 16},     {1, 33, 100},  {2, 5, 128},
                             {3, 130, 129}, {7, 17, 255},   {1, 64, 1024}, {5, 3, 200},
                             {16, 40, 384}, {1, 257, 2048}, {4, 129, 700}, {9, 300, 64}};
  for (int64_t m = 1; m <= 9; ++m) {
    for (int64_t k : {1, 8, 31, 33, 63, 65, 127, 130, 191, 257}) cases.push_back({m, 2 * m + 1, k});
  }
  return cases;
}

void ExpectNearRef(const Case& c, const Data& d, const std::vector<float>& y,
                   const std::vector<float>& yr, const std::string& what) {
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double mag = 0;
      for (int64_t t = 0; t < c.k; ++t) mag += std::fabs(d.x[i * c.k + t] * Dq(d, c, j, t));
      ASSERT_LE(std::fabs(y[i * c.n + j] - yr[i * c.n + j]), kLevelTol * mag + 1e-30)
          << what << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at (" << i << ", " << j
          << ")";
    }
  }
}

std::vector<const KernelTable*> SimdLevels() {
  std::vector<const KernelTable*> out;
  for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (const KernelTable* t = GetKernelTable(l)) out.push_back(t);
  }
  return out;
}

TEST(Fp8Gemm, LevelsMatchRef) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(c.m * 1000 + c.n * 10 + c.k));
    std::vector<float> yr(c.m * c.n, NAN);
    ref::GemmFp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, yr.data(), c.n, c.m, c.n, c.k, {});
    for (const KernelTable* kt : SimdLevels()) {
      ASSERT_NE(kt->gemm_fp8, nullptr);
      std::vector<float> y(c.m * c.n, NAN);
      kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y.data(), c.n, c.m, c.n, c.k, {});
      ExpectNearRef(c, d, y, yr, KernelLevelName(kt->level));
    }
  }
}

std::vector<const KernelTable*> AllLevels() {
  std::vector<const KernelTable*> levels = SimdLevels();
  levels.insert(levels.begin(), GetKernelTable(KernelLevel::kRef));
  return levels;
}

// Runs every level on `d` and checks it against float64: fp32 sequential sums of k products,
// each of a dequantized weight rounded once, are within (k + 1)·2^-24 · Σ|x·w| (the float64
// product of code and scale is exact).
void ExpectEveryLevelNearFloat64(const Case& c, const Data& d) {
  for (const KernelTable* kt : AllLevels()) {
    std::vector<float> y(c.m * c.n, NAN);
    kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y.data(), c.n, c.m, c.n, c.k, {});
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double exact = 0, mag = 0;
        for (int64_t t = 0; t < c.k; ++t) {
          const double wv = double(Fp8E4M3FnToF32(d.w[j * c.k + t])) *
                            d.s[j / kFp8Block * Fp8ScaleCols(c.k) + t / kFp8Block];
          exact += double(d.x[i * c.k + t]) * wv;
          mag += std::fabs(double(d.x[i * c.k + t]) * wv);
        }
        ASSERT_LE(std::fabs(y[i * c.n + j] - exact), (c.k + 1) * 0x1p-24 * mag + 1e-30)
            << KernelLevelName(kt->level) << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at ("
            << i << ", " << j << ")";
      }
    }
  }
}

TEST(Fp8Gemm, EveryLevelMatchesDequantizedFloat64) {
  for (const Case& c : Cases()) {
    ExpectEveryLevelNearFloat64(c, Make(c, static_cast<uint32_t>(7 + c.m + c.n + c.k)));
  }
}

// Every non-NaN code once per W row (so subnormal codes, ±0 and ±448 are each decoded by every
// lane position), a scale of 2^-3 and one ≥ 2^8 (the kernels' second path), against float64.
TEST(Fp8Gemm, EveryCodeDecodesExactly) {
  const Case c{3, 4, 256};
  Data d;
  d.x.resize(c.m * c.k);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : d.x) v = nd(rng);
  d.w.resize(c.n * c.k);
  for (int64_t j = 0; j < c.n; ++j) {
    for (int64_t t = 0; t < c.k; ++t) {
      uint8_t b = static_cast<uint8_t>(t * 5 + j * 3);  // 5 is odd: a permutation of 0..255
      if ((b & 0x7f) == 0x7f) b = 0x80;                 // -0 instead of NaN
      d.w[j * c.k + t] = b;
    }
  }
  d.s = {0.125f, 512.0f};
  ExpectEveryLevelNearFloat64(c, d);
  // Only subnormal codes (|v| <= 7·2^-9): a decoder that flushes them gives 0 here.
  for (auto& b : d.w) b = static_cast<uint8_t>((b & 0x87) == 0 ? 1 : b & 0x87);
  for (const KernelTable* kt : AllLevels()) {
    std::vector<float> y(c.m * c.n, NAN), yr(c.m * c.n, NAN);
    ref::GemmFp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, yr.data(), c.n, c.m, c.n, c.k, {});
    kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y.data(), c.n, c.m, c.n, c.k, {});
    for (size_t e = 0; e < y.size(); ++e) {
      ASSERT_NE(yr[e], 0.0f);
      ASSERT_NEAR(y[e], yr[e], 1e-5 * std::fabs(yr[e])) << KernelLevelName(kt->level) << " " << e;
    }
  }
}

// A NaN code anywhere in a W row (main loop or tail) makes exactly that row's outputs NaN; a
// NaN activation makes its row's outputs NaN.
TEST(Fp8Gemm, NaNCodesAndActivationsPoisonTheirOutputs) {
  const Case c{3, 6, 300};
  for (int64_t col : {0, 77, 130, 299}) {
    for (uint8_t code : {uint8_t{0x7f}, uint8_t{0xff}}) {
      Data d = Make(c, static_cast<uint32_t>(col + code));
      d.w[2 * c.k + col] = code;             // W row 2
      d.x[1 * c.k + (col + 5) % c.k] = NAN;  // activation row 1
      for (const KernelTable* kt : AllLevels()) {
        std::vector<float> y(c.m * c.n, 0.0f);
        kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y.data(), c.n, c.m, c.n, c.k, {});
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < c.n; ++j) {
            EXPECT_EQ(std::isnan(y[i * c.n + j]), i == 1 || j == 2)
                << KernelLevelName(kt->level) << " col " << col << " (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

// Row tiles and column blocks reorder loops only: bit-identical to the default.
TEST(Fp8Gemm, TilingsAreBitIdenticalToDefault) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(3 * c.m + c.n + c.k));
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> y0(c.m * c.n, NAN);
      kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y0.data(), c.n, c.m, c.n, c.k, {});
      for (int mr : {1, 2, 4}) {
        for (int nb : {0, 1, 6, 32}) {
          std::vector<float> y(c.m * c.n, NAN);
          kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y.data(), c.n, c.m, c.n, c.k,
                       GemmTiling{.mr = mr, .nb = nb});
          ASSERT_EQ(y, y0) << KernelLevelName(l) << " m=" << c.m << " n=" << c.n << " k=" << c.k
                           << " mr=" << mr << " nb=" << nb;
        }
      }
    }
  }
}

// A row alone, and a slice of W's rows (its own scale block and phase) into a strided output,
// give the same bits as the whole GEMM and write nothing else.
TEST(Fp8Gemm, RowAndColumnSlicesAreBitIdentical) {
  for (const Case& c : {Case{3, 300, 257}, Case{5, 130, 128}, Case{1, 260, 64}}) {
    const Data d = Make(c, static_cast<uint32_t>(5 * c.m + c.n + c.k));
    const int64_t kb = Fp8ScaleCols(c.k), c0 = 125, c1 = c.n - 3, ldy = c.n + 3;
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> y0(c.m * c.n, NAN);
      kt->gemm_fp8(d.x.data(), c.k, d.w.data(), d.s.data(), 0, y0.data(), c.n, c.m, c.n, c.k, {});
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> row(c.n, NAN);
        kt->gemm_fp8(d.x.data() + i * c.k, c.k, d.w.data(), d.s.data(), 0, row.data(), c.n, 1, c.n,
                     c.k, {});
        for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(row[j], y0[i * c.n + j]);
      }
      std::vector<float> ys(c.m * ldy, NAN);
      kt->gemm_fp8(d.x.data(), c.k, d.w.data() + c0 * c.k, d.s.data() + c0 / kFp8Block * kb,
                   c0 % kFp8Block, ys.data() + c0, ldy, c.m, c1 - c0, c.k, {});
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j >= c0 && j < c1) {
            ASSERT_EQ(ys[i * ldy + j], y0[i * c.n + j]) << KernelLevelName(l) << " col " << j;
          } else {
            ASSERT_TRUE(std::isnan(ys[i * ldy + j])) << "wrote outside the slice at " << j;
          }
        }
      }
    }
  }
}

TEST(Fp8Gemm, ThreadedWrapperWritesEveryElementWithAnyPhase) {
  const Case c{3, 301, 320};
  const Data d = Make(c, 99);
  ThreadPool pool(3), one(1);
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* kt = GetKernelTable(l);
    if (kt == nullptr) continue;
    for (int64_t phase : {0, 37}) {
      // W rows 0.. of the test data sit at `phase` of their block: scales of row j are block
      // (phase + j) / 128 of d.s (which has enough block rows for phase + n ≤ 384).
      std::vector<float> y(c.m * c.n), y1(c.m * c.n), yr(c.m * c.n, NAN);
      GemmFp8(*kt, pool, d.x.data(), c.m, c.k, d.w.data(), d.s.data(), phase, c.n, y.data());
      GemmFp8(*kt, one, d.x.data(), c.m, c.k, d.w.data(), d.s.data(), phase, c.n, y1.data());
      ref::GemmFp8(d.x.data(), c.k, d.w.data(), d.s.data(), phase, yr.data(), c.n, c.m, c.n, c.k,
                   {});
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << i;
        EXPECT_EQ(y[i], y1[i]) << i;
        EXPECT_NEAR(y[i], yr[i], 1e-3 * (1 + std::fabs(yr[i]))) << i;
      }
    }
  }
}

}  // namespace
}  // namespace mx::fp8_test
