// Packed bf16 GEMM (bf16_packed.h): the layout against row-major W; every level's kernel, with
// fp32 and with bf16-rounded activations, against float64 math on fresh random data at shapes
// with partial groups, odd k and every row tile; the FMA levels bit for bit against the ref;
// tilings, a row alone and slices of W's rows bit-identical to the whole GEMM.
#include "kernels/bf16_packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx::bf16_packed_test {
namespace {

// |y − exact| <= kSumTol · Σ|x·w|: fp32 accumulation over ≤ 1000 terms (and vdpbf16ps's own
// rounding of each pair), far above fp32's 2^-24 per step, far below any indexing error.
constexpr double kSumTol = 2e-5;
// bf16 activations: each x rounded to bf16 (≤ 2^-9 relative) before the same sums.
constexpr double kX16Tol = 2.0 / 512;

struct Case {
  int64_t m, n, k;
};

std::vector<Case> Cases() {
  return {{1, 1, 2},
          {1, 16, 64},
          {3, 17, 33},
          {8, 40, 130},
          {9, 47, 257},
          {16, 64, 96},
          {2, 5, 1},
          {5, 100, 63},
          {12, 33, 512},
          {1, 130, 1000},
          // GLM-5.2's widths: K past the kernels' automatic K blocks (o_proj's 16384, an odd
          // 6145), the lm_head's 154,880 rows (a partial last group)
          {9, 35, 16384},
          {4, 21, 6145},
          {1, 154880, 24}};
}

struct Data {
  std::vector<float> x;      // [m, k]
  std::vector<uint16_t> w;   // [n, k] row-major
  std::vector<uint16_t> wp;  // packed
};

Data Make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Data d;
  d.x.resize(c.m * c.k);
  for (auto& v : d.x) v = nd(rng);
  d.w.resize(c.n * c.k);
  for (auto& v : d.w) v = F32ToBf16(0.1f * nd(rng));
  d.wp.assign(Bf16PackedElems(c.n, c.k), 0xAAAA);  // poisoned: Pack must write every element
  PackBf16(d.w.data(), c.k, c.n, c.k, d.wp.data());
  return d;
}

struct Kernel {
  std::string name;
  GemmBf16PackedFn fn;
  bool x16;
};

std::vector<Kernel> Kernels() {
  std::vector<Kernel> out;
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* t = GetKernelTable(l);
    if (t == nullptr) continue;
    for (GemmActivations a : {GemmActivations::kFp32, GemmActivations::kBf16}) {
      const KernelTable& k = WithGemmActivations(*t, a);
      out.push_back({std::string(KernelLevelName(l)) + "/" + GemmActivationsName(a),
                     k.gemm_bf16_packed, a == GemmActivations::kBf16});
    }
    if (l == KernelLevel::kAvx512) {
      out.push_back({"avx512/fma", avx512::GemmBf16PackedFma, false});
    }
  }
  return out;
}

TEST(Bf16Packed, LayoutMatchesRowMajorAndPadsWithZeros) {
  for (const Case& c : Cases()) {
    const Data d = Make(c, static_cast<uint32_t>(c.n * 7 + c.k));
    for (int64_t j = 0; j < Bf16Groups(c.n) * kBf16RowGroup; ++j) {
      for (int64_t col = 0; col < Bf16Pairs(c.k) * 2; ++col) {
        const uint16_t want = j < c.n && col < c.k ? d.w[j * c.k + col] : 0;
        ASSERT_EQ(Bf16PackedAt(d.wp.data(), c.k, j, col), want) << j << "," << col;
      }
    }
  }
}

TEST(Bf16Packed, EveryKernelMatchesFloat64) {
  for (const Kernel& kn : Kernels()) {
    for (const Case& c : Cases()) {
      const Data d = Make(c, static_cast<uint32_t>(c.m + 31 * c.n + c.k));
      std::vector<float> y(c.m * c.n, NAN);
      kn.fn(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, y.data(), c.n, {});
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double exact = 0, mag = 0;
          for (int64_t t = 0; t < c.k; ++t) {
            const double p = double(d.x[i * c.k + t]) * Bf16ToF32(d.w[j * c.k + t]);
            exact += p;
            mag += std::fabs(p);
          }
          // fp32 rounding grows with the terms summed: kSumTol per 1000 of them
          const double per = std::max(1.0, static_cast<double>(c.k) / 1000.0);
          const double tol = (kn.x16 ? kX16Tol : kSumTol * per) * mag + 1e-30;
          ASSERT_LE(std::fabs(y[i * c.n + j] - exact), tol)
              << kn.name << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at " << i << "," << j;
        }
      }
    }
  }
}

// The FMA kernels (AVX2, AVX-512 F) do the ref's arithmetic: the same bits.
TEST(Bf16Packed, FmaLevelsMatchRefBitForBit) {
  for (const Kernel& kn : Kernels()) {
    if (kn.name != "avx2/fp32" && kn.name != "avx512/fma") continue;
    for (const Case& c : Cases()) {
      const Data d = Make(c, static_cast<uint32_t>(3 * c.m + c.n + c.k));
      std::vector<float> y(c.m * c.n, NAN), yr(c.m * c.n, NAN);
      ref::GemmBf16Packed(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, yr.data(), c.n, {});
      kn.fn(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, y.data(), c.n, {});
      ASSERT_EQ(y, yr) << kn.name << " m=" << c.m << " n=" << c.n << " k=" << c.k;
    }
  }
}

// Activations that are bf16 values already (MLA's cached latents in a bf16 cache): the
// rounded-activation kernel gives the exact kernel's bits at every level, so the model may take
// the cheaper one for them (mla.cpp) without changing a result.
TEST(Bf16Packed, Bf16ValuedActivationsGiveTheExactKernelsBits) {
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* t = GetKernelTable(l);
    if (t == nullptr) continue;
    const KernelTable& exact = WithGemmActivations(*t, GemmActivations::kFp32);
    const KernelTable& x16 = WithGemmActivations(*t, GemmActivations::kBf16);
    for (const Case& c : Cases()) {
      Data d = Make(c, static_cast<uint32_t>(5 * c.m + c.n + 11 * c.k));
      for (float& v : d.x) v = Bf16ToF32(F32ToBf16(v));
      std::vector<float> ye(c.m * c.n, NAN), yx(c.m * c.n, NAN);
      exact.gemm_bf16_packed(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, ye.data(), c.n, {});
      x16.gemm_bf16_packed(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, yx.data(), c.n, {});
      ASSERT_EQ(ye, yx) << KernelLevelName(l) << " m=" << c.m << " n=" << c.n << " k=" << c.k;
    }
  }
}

// Tilings, a row alone, and a slice of W's rows into a strided output give the same bits as the
// whole GEMM, and nothing outside the slice is written.
TEST(Bf16Packed, TilingsRowsAndSlicesAreBitIdentical) {
  for (const Kernel& kn : Kernels()) {
    for (const Case& c : Cases()) {
      const Data d = Make(c, static_cast<uint32_t>(5 * c.m + c.n + c.k));
      std::vector<float> y0(c.m * c.n, NAN);
      kn.fn(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, y0.data(), c.n, {});
      for (int mr : {1, 2, 4, 8}) {
        for (int nb : {0, 1, 16, 20, 48}) {
          for (int kc : {0, 1, 7, 64}) {
            std::vector<float> y(c.m * c.n, NAN);
            kn.fn(d.x.data(), c.k, c.m, d.wp.data(), c.k, 0, c.n, y.data(), c.n,
                  GemmTiling{.mr = mr, .nb = nb, .kc = kc});
            ASSERT_EQ(y, y0) << kn.name << " mr=" << mr << " nb=" << nb << " kc=" << kc
                             << " m=" << c.m << " k=" << c.k;
          }
        }
      }
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> row(c.n, NAN);
        kn.fn(d.x.data() + i * c.k, c.k, 1, d.wp.data(), c.k, 0, c.n, row.data(), c.n, {});
        for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(row[j], y0[i * c.n + j]) << kn.name;
      }
      const int64_t c0 = c.n / 3, c1 = c.n - c.n / 4, ldy = c.n + 3;
      for (int kc : {0, 5}) {  // cut groups K-blocked too: taken up from the strided output
        std::vector<float> ys(c.m * ldy, NAN);
        kn.fn(d.x.data(), c.k, c.m, d.wp.data(), c.k, c0, c1, ys.data() + c0, ldy,
              GemmTiling{.kc = kc});
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < ldy; ++j) {
            if (j >= c0 && j < c1) {
              ASSERT_EQ(ys[i * ldy + j], y0[i * c.n + j]) << kn.name << " slice kc=" << kc;
            } else {
              ASSERT_TRUE(std::isnan(ys[i * ldy + j])) << kn.name << " wrote outside at " << j;
            }
          }
        }
      }
    }
  }
}

TEST(Bf16Packed, ThreadedWrapperWritesEveryElement) {
  const Case c{5, 301, 320};
  const Data d = Make(c, 77);
  ThreadPool pool(3), one(1);
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* kt = GetKernelTable(l);
    if (kt == nullptr) continue;
    std::vector<float> y(c.m * c.n), y1(c.m * c.n);
    GemmBf16Packed(*kt, pool, d.x.data(), c.m, c.k, d.wp.data(), c.n, y.data());
    GemmBf16Packed(*kt, one, d.x.data(), c.m, c.k, d.wp.data(), c.n, y1.data());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      ASSERT_EQ(y[i], y1[i]) << i;
    }
  }
}

}  // namespace
}  // namespace mx::bf16_packed_test
