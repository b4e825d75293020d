// The MXFP4 reference codec against every worked example of
// ../shared/reference/mxfp4-and-fp8.md §2.3–§2.5 (codes, scale bytes, packed bytes in both
// layouts, block errors) and the Gaussian error statistics of §2.4.
#include "quant/mxfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/numerics.h"

namespace mx::quant {
namespace {

std::vector<float> Block(std::initializer_list<float> head) {
  std::vector<float> v(kMxBlock, 0.0f);
  std::copy(head.begin(), head.end(), v.begin());
  return v;
}

struct Quantized {
  uint8_t scale;
  std::vector<uint8_t> codes;
  std::vector<float> deq;
};

Quantized Q(const std::vector<float>& x, ScaleMode mode) {
  Quantized q;
  q.codes.resize(kMxBlock);
  EXPECT_TRUE(QuantizeBlock(x.data(), mode, q.codes.data(), &q.scale).ok());
  uint8_t packed[16];
  PackQuark(q.codes.data(), packed);
  q.deq.resize(kMxBlock);
  DequantizeRow(packed, &q.scale, kMxBlock, q.deq.data());
  return q;
}

double RelL2(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, n = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    n += double(x[i]) * x[i];
  }
  return std::sqrt(e / n);
}

std::vector<uint8_t> Head(const std::vector<uint8_t>& v, size_t n) {
  return std::vector<uint8_t>(v.begin(), v.begin() + n);
}

TEST(Mxfp4, Example1FloorAndEven) {
  const auto x = Block({0.3f, -1.2f, 2.6f, 5.0f, -7.1f, 0.05f, 3.4f, -0.9f});
  const Quantized f = Q(x, ScaleMode::kFloor);
  EXPECT_EQ(f.scale, 0x7f);
  EXPECT_EQ(Head(f.codes, 8), (std::vector<uint8_t>{0x1, 0xA, 0x5, 0x6, 0xF, 0x0, 0x5, 0xA}));
  EXPECT_EQ(std::vector<float>(f.deq.begin(), f.deq.begin() + 8),
            (std::vector<float>{0.5f, -1, 3, 4, -6, 0, 3, -1}));
  EXPECT_NEAR(RelL2(x, f.deq), 0.1652, 5e-5);

  const Quantized e = Q(x, ScaleMode::kEven);
  EXPECT_EQ(e.scale, 0x80);
  EXPECT_EQ(Head(e.codes, 8), (std::vector<uint8_t>{0x0, 0x9, 0x3, 0x4, 0xE, 0x0, 0x3, 0x9}));
  EXPECT_EQ(std::vector<float>(e.deq.begin(), e.deq.begin() + 8),
            (std::vector<float>{0, -1, 3, 4, -8, 0, 3, -1}));
  EXPECT_NEAR(RelL2(x, e.deq), 0.1538, 5e-5);
}

TEST(Mxfp4, Example2SmallValues) {
  const auto x = Block({0.0123f, -0.004f, 0.0009f, 0.0061f});
  for (ScaleMode m : {ScaleMode::kFloor, ScaleMode::kEven}) {
    const Quantized q = Q(x, m);
    EXPECT_EQ(q.scale, 0x76) << ScaleModeName(m);
    EXPECT_EQ(Head(q.codes, 4), (std::vector<uint8_t>{0x7, 0xC, 0x1, 0x5}));
    EXPECT_EQ(std::vector<float>(q.deq.begin(), q.deq.begin() + 4),
              (std::vector<float>{0.01171875f, -0.00390625f, 0.0009765625f, 0.005859375f}));
    EXPECT_NEAR(RelL2(x, q.deq), 0.0447, 5e-5);
  }
}

TEST(Mxfp4, Example3RampBothLayouts) {
  std::vector<float> x(kMxBlock);
  for (int j = 0; j < kMxBlock; ++j) x[j] = (j - 16) * 0.375f;
  const std::vector<uint8_t> want_codes = {0xF, 0xF, 0xF, 0xE, 0xE, 0xE, 0xE, 0xD, 0xD, 0xD, 0xC,
                                           0xC, 0xB, 0xA, 0xA, 0x9, 0x0, 0x1, 0x2, 0x2, 0x3, 0x4,
                                           0x4, 0x5, 0x5, 0x5, 0x6, 0x6, 0x6, 0x6, 0x7, 0x7};
  for (ScaleMode m : {ScaleMode::kFloor, ScaleMode::kEven}) {
    const Quantized q = Q(x, m);
    EXPECT_EQ(q.scale, 0x7f);
    EXPECT_EQ(q.codes, want_codes);
    EXPECT_EQ(q.deq, (std::vector<float>{-6, -6,   -6, -4, -4,   -4, -4,  -3, -3, -3,  -2,
                                         -2, -1.5, -1, -1, -0.5, 0,  0.5, 1,  1,  1.5, 2,
                                         2,  3,    3,  3,  4,    4,  4,   4,  6,  6}));
    EXPECT_NEAR(RelL2(x, q.deq), 0.1081, 5e-5);
  }
  uint8_t quark[16], split[16];
  PackQuark(want_codes.data(), quark);
  PackSplitHalf(want_codes.data(), split);
  EXPECT_EQ(std::vector<uint8_t>(quark, quark + 16),
            (std::vector<uint8_t>{0xff, 0xef, 0xee, 0xde, 0xdd, 0xcc, 0xab, 0x9a, 0x10, 0x22, 0x43,
                                  0x54, 0x55, 0x66, 0x66, 0x77}));
  EXPECT_EQ(std::vector<uint8_t>(split, split + 16),
            (std::vector<uint8_t>{0x0f, 0x1f, 0x2f, 0x2e, 0x3e, 0x4e, 0x4e, 0x5d, 0x5d, 0x5d, 0x6c,
                                  0x6c, 0x6b, 0x6a, 0x7a, 0x79}));
  uint8_t repacked[16];
  RepackQuarkToSplitHalf(quark, 1, repacked);
  EXPECT_EQ(std::vector<uint8_t>(repacked, repacked + 16), std::vector<uint8_t>(split, split + 16));
  // The row API gives the same bytes.
  uint8_t packed[16], scale;
  ASSERT_TRUE(QuantizeRow(x.data(), kMxBlock, ScaleMode::kEven, packed, &scale).ok());
  EXPECT_EQ(std::vector<uint8_t>(packed, packed + 16), std::vector<uint8_t>(quark, quark + 16));
}

// §2.3: ties at scale 1 go to the even mantissa; beyond 6 saturates; -0 keeps code 8.
TEST(Mxfp4, TieTableAtScaleOne) {
  const std::vector<std::pair<float, float>> cases = {
      {0.25f, 0.0f}, {0.75f, 1.0f}, {1.25f, 1.0f},   {1.75f, 2.0f}, {2.5f, 2.0f},
      {3.5f, 4.0f},  {5.0f, 4.0f},  {-0.75f, -1.0f}, {6.5f, 6.0f},  {7.9f, 6.0f}};
  for (auto [in, want] : cases) {
    // amax 6 in element 31 pins the scale to 2^0 in both modes (6 = 1.5·2^2).
    auto x = Block({in});
    x[31] = 6.0f;
    if (std::fabs(in) > 6.0f) x[31] = 0.0f;  // then in is the max: floor mode keeps X = 1
    const Quantized q = Q(x, ScaleMode::kFloor);
    ASSERT_EQ(q.scale, 0x7f) << in;
    EXPECT_EQ(q.deq[0], want) << in;
  }
  auto x = Block({-0.0f, -0.01f});
  x[31] = 1.0f;
  const Quantized q = Q(x, ScaleMode::kEven);
  EXPECT_EQ(q.codes[0], 0x8);
  EXPECT_EQ(q.codes[1], 0x8);
}

TEST(Mxfp4, ScaleEdgeCases) {
  EXPECT_EQ(E8M0ScaleFor(0.0f, ScaleMode::kEven), 0);
  EXPECT_EQ(E8M0ScaleFor(0.0f, ScaleMode::kFloor), 0);
  EXPECT_EQ(E8M0ScaleFor(1e-45f, ScaleMode::kEven), 0);  // subnormal: clamps to 2^-127
  // 3e38 = 1.76·2^127: floor gives 2^125; even rounds the mantissa up to 2^128 -> 2^126.
  EXPECT_EQ(E8M0ScaleFor(3.0e38f, ScaleMode::kFloor), 252);
  EXPECT_EQ(E8M0ScaleFor(3.0e38f, ScaleMode::kEven), 253);
  EXPECT_EQ(E8M0ScaleFor(7.0f, ScaleMode::kFloor), 127);  // 1.75·2^2
  EXPECT_EQ(E8M0ScaleFor(7.0f, ScaleMode::kEven), 128);
  EXPECT_EQ(E8M0ScaleFor(6.99f, ScaleMode::kEven), 127);
}

TEST(Mxfp4, NonFiniteInputIsAnError) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> row(64, 1.0f);
    row[37] = bad;
    std::vector<uint8_t> packed(32), scales(2);
    Status st = QuantizeRow(row.data(), 64, ScaleMode::kEven, packed.data(), scales.data());
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("column 37"), std::string::npos) << st.message();
  }
  std::vector<float> row(48, 1.0f);
  std::vector<uint8_t> packed(24), scales(2);
  EXPECT_FALSE(QuantizeRow(row.data(), 48, ScaleMode::kEven, packed.data(), scales.data()).ok());
}

TEST(Mxfp4, Bf16RowMatchesFloatRow) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.02f);
  const int64_t k = 256;
  std::vector<uint16_t> b(k);
  std::vector<float> f(k);
  for (int64_t i = 0; i < k; ++i) {
    b[i] = F32ToBf16(d(rng));
    f[i] = Bf16ToF32(b[i]);
  }
  std::vector<uint8_t> p1(k / 2), s1(k / 32), p2(k / 2), s2(k / 32);
  ASSERT_TRUE(QuantizeRowBf16(b.data(), k, ScaleMode::kEven, p1.data(), s1.data()).ok());
  ASSERT_TRUE(QuantizeRow(f.data(), k, ScaleMode::kEven, p2.data(), s2.data()).ok());
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(s1, s2);
}

// §2.4: relative RMS error on Gaussian blocks (reference: floor 0.1152, even 0.1120 over
// 20 000 blocks); saturation share floor 2.333 %, even 0.610 %.
TEST(Mxfp4, GaussianErrorStatistics) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int n_blocks = 20000;
  std::vector<float> x(n_blocks * kMxBlock);
  for (auto& v : x) v = d(rng);
  for (auto [mode, want_rms, want_sat] :
       {std::tuple{ScaleMode::kFloor, 0.1152, 0.02333}, {ScaleMode::kEven, 0.1120, 0.00610}}) {
    std::vector<uint8_t> packed(x.size() / 2), scales(n_blocks);
    ASSERT_TRUE(QuantizeRow(x.data(), int64_t(x.size()), mode, packed.data(), scales.data()).ok());
    std::vector<float> y(x.size());
    DequantizeRow(packed.data(), scales.data(), int64_t(x.size()), y.data());
    int64_t saturated = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) > 6.0f * E8M0ToF32(scales[i / kMxBlock])) ++saturated;  // clipped
    }
    const double rms = RelL2(x, y);
    const double sat = double(saturated) / x.size();
    std::printf("[%s] rel-RMS %.4f, SQNR %.2f dB, saturated %.3f%%\n", ScaleModeName(mode), rms,
                -20 * std::log10(rms), 100 * sat);
    EXPECT_NEAR(rms, want_rms, 0.002) << ScaleModeName(mode);
    EXPECT_NEAR(sat, want_sat, 0.001) << ScaleModeName(mode);
  }
}

}  // namespace
}  // namespace mx::quant
