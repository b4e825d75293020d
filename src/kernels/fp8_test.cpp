// Packed FP8 block-scaled GEMM (fp8.h): the layout and the expanded scales against row-major W,
// the exact decode of every code; every level's kernel (fp32 and bf16-rounded activations)
// against float64 math on the dequantized weights on fresh random data at shapes with partial
// groups, quads and blocks; the FMA levels bit for bit against the ref twin and the vdpbf16ps
// kernel within fp32 summation error of it; every e4m3 code (subnormals, -0) decoded exactly;
// NaN codes and activations poisoning their outputs; bit-identical tilings, rows and slices;
// the threaded wrapper with a phase.
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

// |y − exact| <= kSumTol · Σ|x·w| for exact activations: fp32 accumulation over <= 2048 terms
// in 128-column blocks (and vdpbf16ps's own rounding of each pair), far above fp32's 2^-24 per
// step, far below any indexing or decode error (a wrong code is off by >= 1/16 of one term).
constexpr double kSumTol = 2e-5;
// bf16 activations: each x rounded to bf16 (<= 2^-9 relative) before the same sums.
constexpr double kX16Tol = 2.0 / 512;
// The vdpbf16ps kernel against the FMA twin: both within fp32 summation error.
constexpr double kLevelTol = 2 * kSumTol;

struct Case {
  int64_t m, n, k;
  int64_t phase = 0;
};

struct Data {
  std::vector<float> x;    // [m, k]
  std::vector<uint8_t> w;  // [n, k] e4m3
  std::vector<float> s;    // [ceil((phase + n)/128), ceil(k/128)]
  std::vector<uint8_t> wp;
  std::vector<float> sp;
};

void Pack(const Case& c, Data& d) {
  d.wp.assign(Fp8PackedBytes(c.n, c.k), 0xAA);  // poisoned: Pack must write every byte
  d.sp.assign(Fp8PackedScales(c.n, c.k), NAN);
  PackFp8(d.w.data(), c.k, d.s.data(), c.phase, c.n, c.k, d.wp.data(), d.sp.data());
}

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
  d.s.resize(((c.phase + c.n + kFp8Block - 1) / kFp8Block) * Fp8ScaleCols(c.k));
  for (auto& v : d.s) v = std::exp2(ex(rng)) * (byte(rng) < 16 ? -1.0f : 1.0f);
  Pack(c, d);
  return d;
}

// W[j, t] dequantized as PyTorch does: fp32(e4m3 · scale), in float64 (exact).
double Dq(const Data& d, const Case& c, int64_t j, int64_t t) {
  return double(Fp8E4M3FnToF32(d.w[j * c.k + t])) *
         d.s[(c.phase + j) / kFp8Block * Fp8ScaleCols(c.k) + t / kFp8Block];
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {{1, 1, 1},        {1, 7, 16},        {1, 33, 100},  {2, 5, 128},
                             {3, 130, 129},    {7, 17, 255},      {1, 64, 1024}, {5, 3, 200},
                             {16, 40, 384},    {1, 257, 2048},    {4, 129, 700}, {9, 300, 64},
                             {12, 33, 130, 5}, {8, 48, 256, 120}, {13, 50, 300}, {15, 33, 130, 7},
                             {21, 40, 257}};  // 13, 15, 21: an overlapped tile
  for (int64_t m = 1; m <= 9; ++m) {
    for (int64_t k : {1, 2, 3, 5, 31, 63, 127, 130, 257}) cases.push_back({m, 2 * m + 15, k});
  }
  return cases;
}

struct Kernel {
  std::string name;
  GemmFp8Fn fn;
  bool x16, fma;  // fma: the ref's arithmetic (bit-identical to the ref twin)
};

std::vector<Kernel> Kernels() {
  std::vector<Kernel> out;
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* t = GetKernelTable(l);
    if (t == nullptr) continue;
    for (GemmActivations a : {GemmActivations::kFp32, GemmActivations::kBf16}) {
      const KernelTable& k = WithGemmActivations(*t, a);
      const bool dot = k.gemm_fp8 == avx512::GemmFp8Dot || k.gemm_fp8 == avx512::GemmFp8DotX16;
      out.push_back({std::string(KernelLevelName(l)) + "/" + GemmActivationsName(a), k.gemm_fp8,
                     a == GemmActivations::kBf16, !dot});
    }
  }
  return out;
}

TEST(Fp8Packed, LayoutAndScalesMatchRowMajorAndPad) {
  for (const Case& c : Cases()) {
    Data d = Make(c, static_cast<uint32_t>(c.n * 7 + c.k));
    d.w[0] = 0x7f;  // a NaN code: its row and block's scale becomes NaN
    Pack(c, d);
    for (int64_t j = 0; j < Fp8Groups(c.n) * kFp8RowGroup; ++j) {
      for (int64_t col = 0; col < 4 * Fp8Quads(c.k); ++col) {
        const uint8_t want = j < c.n && col < c.k ? d.w[j * c.k + col] : 0;
        ASSERT_EQ(Fp8PackedAt(d.wp.data(), c.k, j, col), want) << j << "," << col;
      }
      const int64_t kb = Fp8ScaleCols(c.k);
      for (int64_t b = 0; b < kb; ++b) {
        const float got = d.sp[(j / kFp8RowGroup * kb + b) * kFp8RowGroup + j % kFp8RowGroup];
        if (j == 0 && b == 0) {
          ASSERT_TRUE(std::isnan(got));
        } else if (j >= c.n) {
          ASSERT_EQ(got, 0.0f);
        } else {
          ASSERT_EQ(got, 256.0f * d.s[(c.phase + j) / kFp8Block * kb + b]) << j << "," << b;
        }
      }
    }
  }
}

// Every code decodes to its e4m3 value · 2^-8 exactly (subnormals, ±0, ±448); NaN codes to the
// finite 480 · 2^-8 (their NaN comes from the packed scale).
TEST(Fp8Packed, EveryCodeDecodesExactly) {
  for (int c = 0; c < 256; ++c) {
    const float got = Bf16ToF32(Fp8CodeToBf16Scaled(static_cast<uint8_t>(c)));
    const float v = Fp8E4M3FnToF32(static_cast<uint8_t>(c));
    const float want = std::isnan(v) ? std::copysign(1.875f, (c & 0x80) ? -1.0f : 1.0f) : v / 256;
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << c;
    ASSERT_EQ(got, want) << c;
  }
}

// Runs kernel `kn` on `d` and checks it against float64 on the dequantized weights.
void ExpectNearFloat64(const Kernel& kn, const Case& c, const Data& d) {
  std::vector<float> y(c.m * c.n, NAN);
  kn.fn(d.x.data(), c.k, c.m, d.wp.data(), d.sp.data(), c.k, 0, c.n, y.data(), c.n, {});
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double exact = 0, mag = 0;
      for (int64_t t = 0; t < c.k; ++t) {
        const double p = double(d.x[i * c.k + t]) * Dq(d, c, j, t);
        exact += p;
        mag += std::fabs(p);
      }
      const double tol = (kn.x16 ? kX16Tol : kSumTol) * mag + 1e-30;
      ASSERT_LE(std::fabs(y[i * c.n + j] - exact), tol)
          << kn.name << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at " << i << "," << j;
    }
  }
}

TEST(Fp8Packed, EveryKernelMatchesFloat64) {
  for (const Kernel& kn : Kernels()) {
    for (const Case& c : Cases()) {
      ExpectNearFloat64(kn, c, Make(c, static_cast<uint32_t>(c.m + 31 * c.n + c.k + c.phase)));
    }
  }
}

// The FMA kernels (AVX2, the AVX-512 table without AVX512_BF16) do the ref's arithmetic: the
// same bits; the vdpbf16ps kernel is within kLevelTol of it.
TEST(Fp8Packed, LevelsMatchTheRefTwin) {
  for (const Kernel& kn : Kernels()) {
    const GemmFp8Fn twin = kn.x16 ? ref::GemmFp8X16 : ref::GemmFp8;
    for (const Case& c : Cases()) {
      const Data d = Make(c, static_cast<uint32_t>(3 * c.m + c.n + c.k));
      std::vector<float> y(c.m * c.n, NAN), yr(c.m * c.n, NAN);
      twin(d.x.data(), c.k, c.m, d.wp.data(), d.sp.data(), c.k, 0, c.n, yr.data(), c.n, {});
      kn.fn(d.x.data(), c.k, c.m, d.wp.data(), d.sp.data(), c.k, 0, c.n, y.data(), c.n, {});
      if (kn.fma) {
        ASSERT_EQ(y, yr) << kn.name << " m=" << c.m << " n=" << c.n << " k=" << c.k;
        continue;
      }
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double mag = 0;
          for (int64_t t = 0; t < c.k; ++t) mag += std::fabs(d.x[i * c.k + t] * Dq(d, c, j, t));
          ASSERT_LE(std::fabs(y[i * c.n + j] - yr[i * c.n + j]), kLevelTol * mag + 1e-30)
              << kn.name << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at " << i << "," << j;
        }
      }
    }
  }
}

// Every non-NaN code once per W row (so subnormal codes, ±0 and ±448 are each decoded by every
// lane position), scales 2^-3 and 2^100, against float64; then only subnormal codes (a decoder
// that flushes them gives 0).
TEST(Fp8Packed, EveryCodeInTheKernelsMatchesFloat64) {
  const Case c{3, 20, 256};
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
  d.s = {0.125f, 0x1p100f};
  Pack(c, d);
  for (const Kernel& kn : Kernels()) ExpectNearFloat64(kn, c, d);
  for (auto& b : d.w) b = static_cast<uint8_t>((b & 0x87) == 0 ? 1 : b & 0x87);
  Pack(c, d);
  for (const Kernel& kn : Kernels()) {
    std::vector<float> y(c.m * c.n, NAN);
    kn.fn(d.x.data(), c.k, c.m, d.wp.data(), d.sp.data(), c.k, 0, c.n, y.data(), c.n, {});
    for (float v : y) ASSERT_NE(v, 0.0f) << kn.name;
    ExpectNearFloat64(kn, c, d);
  }
}

// A NaN code anywhere in a W row (any block, quad or lane) makes exactly that row's outputs
// NaN; a NaN activation makes its row's outputs NaN.
TEST(Fp8Packed, NaNCodesAndActivationsPoisonTheirOutputs) {
  const Case c{3, 20, 300};
  for (int64_t col : {0, 77, 130, 299}) {
    for (uint8_t code : {uint8_t{0x7f}, uint8_t{0xff}}) {
      Data d = Make(c, static_cast<uint32_t>(col + code));
      d.w[17 * c.k + col] = code;            // W row 17
      d.x[1 * c.k + (col + 5) % c.k] = NAN;  // activation row 1
      Pack(c, d);
      for (const Kernel& kn : Kernels()) {
        std::vector<float> y(c.m * c.n, 0.0f);
        kn.fn(d.x.data(), c.k, c.m, d.wp.data(), d.sp.data(), c.k, 0, c.n, y.data(), c.n, {});
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < c.n; ++j) {
            EXPECT_EQ(std::isnan(y[i * c.n + j]), i == 1 || j == 17)
                << kn.name << " col " << col << " (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

// Tilings, a row alone, and a slice of W's rows into a strided output give the same bits as the
// whole GEMM, and nothing outside the slice is written.
TEST(Fp8Packed, TilingsRowsAndSlicesAreBitIdentical) {
  for (const Kernel& kn : Kernels()) {
    for (const Case& c : Cases()) {
      const Data d = Make(c, static_cast<uint32_t>(5 * c.m + c.n + c.k));
      auto run = [&](const float* x, int64_t m, int64_t r0, int64_t r1, float* y, int64_t ldy,
                     GemmTiling t) {
        kn.fn(x, c.k, m, d.wp.data(), d.sp.data(), c.k, r0, r1, y, ldy, t);
      };
      std::vector<float> y0(c.m * c.n, NAN);
      run(d.x.data(), c.m, 0, c.n, y0.data(), c.n, {});
      for (int mr : {1, 2, 4, 8}) {
        for (int nb : {0, 1, 16, 20, 48}) {
          std::vector<float> y(c.m * c.n, NAN);
          run(d.x.data(), c.m, 0, c.n, y.data(), c.n, GemmTiling{.mr = mr, .nb = nb});
          ASSERT_EQ(y, y0) << kn.name << " mr=" << mr << " nb=" << nb << " m=" << c.m;
        }
      }
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> row(c.n, NAN);
        run(d.x.data() + i * c.k, 1, 0, c.n, row.data(), c.n, {});
        for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(row[j], y0[i * c.n + j]) << kn.name;
      }
      const int64_t c0 = c.n / 3, c1 = c.n - c.n / 4, ldy = c.n + 3;
      std::vector<float> ys(c.m * ldy, NAN);
      run(d.x.data(), c.m, c0, c1, ys.data() + c0, ldy, {});
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j >= c0 && j < c1) {
            ASSERT_EQ(ys[i * ldy + j], y0[i * c.n + j]) << kn.name << " slice";
          } else {
            ASSERT_TRUE(std::isnan(ys[i * ldy + j])) << kn.name << " wrote outside at " << j;
          }
        }
      }
    }
  }
}

TEST(Fp8Packed, ThreadedWrapperWritesEveryElement) {
  for (int64_t phase : {0, 37}) {
    const Case c{5, 301, 320, phase};
    const Data d = Make(c, 77);
    ThreadPool pool(3), one(1);
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> y(c.m * c.n), y1(c.m * c.n);
      GemmFp8(*kt, pool, d.x.data(), c.m, c.k, d.wp.data(), d.sp.data(), c.n, y.data());
      GemmFp8(*kt, one, d.x.data(), c.m, c.k, d.wp.data(), d.sp.data(), c.n, y1.data());
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << i;
        ASSERT_EQ(y[i], y1[i]) << i;
      }
    }
  }
}

}  // namespace
}  // namespace mx::fp8_test
