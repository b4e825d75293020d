// MXFP4 GEMM: every level against the scalar ref on fresh random weights and activations at
// many shapes (odd block counts, N not a multiple of anything) — bit for bit, as mxfp4.h
// promises one arithmetic — and the ref against float64 math on the dequantized weights (the
// int8 activation rounding is the only error); the packed layout against split-half rows.
#include "kernels/mxfp4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx {
namespace {

// |ref − exact| <= kQ8Tol · sqrt(Σ (w·amax_block)²): int8 rounding, ≤ amax/254 per element.
constexpr double kQ8Tol = 0.02;

struct Case {
  int64_t m, n, k;
};

struct Data {
  std::vector<float> x;     // [m, k]
  std::vector<uint8_t> wq;  // [n, k/2] split-half
  std::vector<uint8_t> we;  // [n, k/32]
  std::vector<uint8_t> pq;  // the kernels' packed layout of wq, we
  std::vector<uint8_t> pe;
  std::vector<float> w;  // [n, k] dequantized
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
  d.pq.assign(Mxfp4PackedCodeBytes(c.n, c.k), 0xAA);  // poisoned: Pack must write every byte
  d.pe.assign(Mxfp4PackedScaleBytes(c.n, c.k), 0xAA);
  PackMxfp4(d.wq.data(), d.we.data(), c.n, c.k, d.pq.data(), d.pe.data());
  return d;
}

// The SIMD kernels take groups of 16 W rows (8 per AVX2 half) and row tiles of up to 4: N around
// and between multiples of 16, odd block counts, m = 1..9 rows (and 15, 23: ForEachTileOverlapped).
std::vector<Case> Cases() {
  std::vector<Case> cases = {{1, 1, 32},    {1, 7, 64},     {1, 33, 96},   {2, 5, 288},
                             {3, 130, 256}, {7, 17, 544},   {1, 64, 1024}, {5, 3, 32},
                             {16, 40, 160}, {1, 257, 2048}, {1, 9, 6144},  {15, 40, 160},
                             {23, 17, 544}};  // 15, 23: an overlapped row tile
  const int64_t blocks[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 48};
  for (int64_t m = 1; m <= 9; ++m) {
    for (size_t b = m % 2; b < std::size(blocks); b += 2)
      cases.push_back({m, 2 * m + 1, 32 * blocks[b]});
  }
  return cases;
}

// y and yr ([m, n]) are the same bits (y from `what`).
void ExpectSameBits(const Case& c, const std::vector<float>& y, const std::vector<float>& yr,
                    const std::string& what) {
  for (int64_t i = 0; i < c.m * c.n; ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << what << " left element " << i << " unwritten";
    ASSERT_EQ(y[i], yr[i]) << what << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at ("
                           << i / c.n << ", " << i % c.n << ")";
  }
}

std::vector<BlockQ8> QuantizeRows(const Case& c, const Data& d) {
  std::vector<BlockQ8> xq(c.m * c.k / 32);
  for (int64_t i = 0; i < c.m; ++i)
    QuantizeRowQ8(d.x.data() + i * c.k, c.k, xq.data() + i * c.k / 32);
  return xq;
}

TEST(Mxfp4Gemm, LevelsMatchRefBitForBit) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(c.m * 1000 + c.n * 10 + c.k));
    const std::vector<BlockQ8> xq = QuantizeRows(c, d);
    std::vector<float> yr(c.m * c.n, NAN);
    ref::GemmMxfp4(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, yr.data(), c.n, {});
    for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      ASSERT_NE(kt->gemm_mxfp4, nullptr);
      std::vector<float> y(c.m * c.n, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, y.data(), c.n, {});
      ExpectSameBits(c, y, yr, KernelLevelName(l));
    }
  }
}

// Block scales at the bottom of the E8M0 range (e = 0, 1 give the fp32 subnormals 2^-128,
// 2^-127 in the doubled table) against activations of 1e30, so that d · 2^(e−128) is a normal
// float and a wrong vector decoding of the small exponents would show.
TEST(Mxfp4Gemm, LevelsMatchRefWithTinyScalesBitForBit) {
  for (const Case& c : {Case{1, 9, 32 * 17}, Case{3, 5, 32 * 33}, Case{5, 7, 32 * 9}}) {
    Data d = Make(c, static_cast<uint32_t>(c.m + c.k), 0, 3);
    for (float& v : d.x) v *= 1e30f;
    const std::vector<BlockQ8> xq = QuantizeRows(c, d);
    std::vector<float> yr(c.m * c.n, NAN);
    ref::GemmMxfp4(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, yr.data(), c.n, {});
    for (float v : yr) ASSERT_TRUE(std::isnormal(v) || v == 0.0f) << v;
    for (KernelLevel l : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> y(c.m * c.n, NAN);
      kt->gemm_mxfp4(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, y.data(), c.n, {});
      ExpectSameBits(c, y, yr, KernelLevelName(l));
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
    ref::GemmMxfp4(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, y.data(), c.n, {});
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
      fn(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, y0.data(), c.n, {});
      for (int mr : {1, 2, 4, 8}) {
        for (int nb : {0, 1, 16, 20, 48}) {
          std::vector<float> y(c.m * c.n, NAN);
          fn(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, y.data(), c.n,
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
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      const GemmMxfp4Fn fn = kt->gemm_mxfp4 != nullptr ? kt->gemm_mxfp4 : ref::GemmMxfp4;
      std::vector<float> y0(c.m * c.n, NAN);
      fn(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, 0, c.n, y0.data(), c.n, {});
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> row(c.n, NAN);
        fn(xq.data() + i * nb, 1, d.pq.data(), d.pe.data(), c.k, 0, c.n, row.data(), c.n, {});
        for (int64_t j = 0; j < c.n; ++j) {
          ASSERT_EQ(row[j], y0[i * c.n + j]) << KernelLevelName(l) << " m=" << c.m << " n=" << c.n
                                             << " k=" << c.k << " row " << i << " col " << j;
        }
      }
      std::vector<float> ys(c.m * ldy, NAN);
      fn(xq.data(), c.m, d.pq.data(), d.pe.data(), c.k, c0, c1, ys.data() + c0, ldy, {});
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
    GemmMxfp4(*kt, pool, d.x.data(), c.m, c.k, d.pq.data(), d.pe.data(), c.n, y.data());
    ThreadPool one(1);
    GemmMxfp4(*kt, one, d.x.data(), c.m, c.k, d.pq.data(), d.pe.data(), c.n, y1.data());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      EXPECT_EQ(y[i], y1[i]) << i;
    }
  }
}

// Every split-half row comes back out of the packed layout; the padding rows of the last group
// are zero codes with zero scales; the packed position of one element matches the header's map.
TEST(Mxfp4Pack, RoundTripsAndPadsWithZeros) {
  for (const Case& c : {Case{1, 1, 32}, Case{1, 16, 64}, Case{1, 17, 96}, Case{1, 45, 544}}) {
    const Data d = Make(c, static_cast<uint32_t>(c.n + c.k));
    const int64_t nb = c.k / 32;
    std::vector<uint8_t> q(c.k / 2), e(nb);
    for (int64_t j = 0; j < c.n; ++j) {
      UnpackMxfp4Row(d.pq.data(), d.pe.data(), c.k, j, q.data(), e.data());
      ASSERT_TRUE(std::equal(q.begin(), q.end(), d.wq.begin() + j * c.k / 2)) << "row " << j;
      ASSERT_TRUE(std::equal(e.begin(), e.end(), d.we.begin() + j * nb)) << "row " << j;
    }
    for (int64_t j = c.n; j < Mxfp4Groups(c.n) * kMxRowGroup; ++j) {
      UnpackMxfp4Row(d.pq.data(), d.pe.data(), c.k, j, q.data(), e.data());
      for (uint8_t v : q) ASSERT_EQ(v, 0) << "padding row " << j;
      for (uint8_t v : e) ASSERT_EQ(v, 0) << "padding row " << j;
    }
    // Row 16g + l, block b, split-half byte 4c + t sits at (g·nb + b)·256 + 64c + 4l + t.
    const int64_t j = c.n - 1, g = j / 16, l = j % 16, b = nb - 1;
    for (int s = 0; s < 16; ++s) {
      ASSERT_EQ(d.pq[(g * nb + b) * 256 + 64 * (s / 4) + 4 * l + s % 4],
                d.wq[j * c.k / 2 + b * 16 + s]);
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

// The vectorised quantizer against its scalar twin, bit for bit: normal data, exact halves
// (x · 127/amax landing on .5, where rounding to even matters), zeros, blocks of one sign.
TEST(Mxfp4Gemm, QuantizeRowQ8MatchesScalarTwin) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t k : {32, 64, 320, 2048}) {
    std::vector<float> x(k);
    for (auto& v : x) v = nd(rng);
    for (int64_t i = 0; i < k; i += 7) x[i] = static_cast<float>(i % 255 - 127) / 2;  // halves
    for (int64_t i = 0; i < std::min<int64_t>(k, 32); ++i) x[i] = (k == 64) ? 0.0f : x[i];
    if (k == 320) {
      for (int64_t i = 32; i < 64; ++i) x[i] = std::fabs(x[i]) + 1e-3f;
    }
    if (k == 2048) {  // block 5 has amax 127, so x · 127/amax = x: every .5 is a tie
      for (int64_t t = 0; t < 32; ++t) x[160 + t] = static_cast<float>(t) - 15.5f;
      x[160] = 127.0f;
    }
    std::vector<BlockQ8> got(k / 32), want(k / 32);
    QuantizeRowQ8(x.data(), k, got.data());
    ref::QuantizeRowQ8(x.data(), k, want.data());
    for (int64_t b = 0; b < k / 32; ++b) {
      ASSERT_EQ(got[b].d, want[b].d) << "k=" << k << " block " << b;
      ASSERT_EQ(got[b].sum, want[b].sum) << "k=" << k << " block " << b;
      for (int t = 0; t < 32; ++t) ASSERT_EQ(got[b].qs[t], want[b].qs[t]) << "k=" << k << " " << b;
    }
  }
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
