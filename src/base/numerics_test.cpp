// Exhaustive tests over every code of each format, and random-float encode tests against an
// independent reference: "nearest representable value, ties to the even code", found by
// search over a sorted table of the format's values (not by bit tricks).
#include "base/numerics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace mx {
namespace {

// Reference encoder: values = decode(code) for every non-NaN code with sign bit clear.
// Returns the code of the nearest value to |x| (ties -> even code), saturating at the max
// when `saturate`, otherwise returning `overflow_code` beyond max + half an ulp.
struct RefFormat {
  std::vector<std::pair<double, uint32_t>> table;  // (value, code) sorted by value
  uint32_t sign_bit;

  RefFormat(uint32_t n_codes, uint32_t sign_bit, const std::function<float(uint32_t)>& decode)
      : sign_bit(sign_bit) {
    for (uint32_t c = 0; c < n_codes; ++c) {
      if (c & sign_bit) continue;
      float v = decode(c);
      if (std::isnan(v) || std::isinf(v)) continue;
      table.emplace_back(v, c);
    }
    std::sort(table.begin(), table.end());
  }

  uint32_t Nearest(double a) const {
    auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(a, 0u));
    if (it == table.end()) return table.back().second;
    if (it == table.begin() || it->first == a) return it->second;
    auto lo = std::prev(it);
    double dlo = a - lo->first, dhi = it->first - a;
    if (dlo < dhi) return lo->second;
    if (dhi < dlo) return it->second;
    return (lo->second & 1) == 0 ? lo->second : it->second;
  }
  double Max() const { return table.back().first; }
};

TEST(Bf16, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = Bf16ToF32(static_cast<uint16_t>(c));
    uint16_t back = F32ToBf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToF32(back))) << c;
      EXPECT_EQ(back & 0x8000, c & 0x8000) << "NaN keeps its sign";
    } else {
      EXPECT_EQ(back, c) << "code " << c;
    }
  }
}

TEST(Bf16, RandomFloatsMatchReference) {
  RefFormat ref(65536, 0x8000, [](uint32_t c) { return Bf16ToF32(static_cast<uint16_t>(c)); });
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  int tested = 0;
  for (int i = 0; i < 200000; ++i) {
    float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f) || std::isinf(f)) continue;
    double a = std::fabs(static_cast<double>(f));
    uint16_t got = F32ToBf16(f);
    // bf16 overflow: beyond max + half ulp rounds to inf
    double max = ref.Max();
    double half_ulp = std::ldexp(1.0, 127 - 8);
    if (a >= max + half_ulp) {
      EXPECT_TRUE(std::isinf(Bf16ToF32(got))) << f;
      continue;
    }
    uint32_t want = ref.Nearest(a) | (std::signbit(f) ? 0x8000u : 0u);
    ASSERT_EQ(got, want) << "f=" << f;
    ++tested;
  }
  EXPECT_GT(tested, 100000);
}

TEST(Bf16, NaNStaysNaN) {
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // a signalling NaN whose payload sits only in the low 16 bits must not become inf
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::bit_cast<float>(0x7f800001u)))));
}

TEST(F16, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = F16ToF32(static_cast<uint16_t>(c));
    uint16_t back = F32ToF16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(back))) << c;
    } else {
      EXPECT_EQ(back, c) << "code " << c;
    }
  }
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
}

TEST(F16, RandomFloatsMatchReference) {
  RefFormat ref(65536, 0x8000, [](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); });
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> mag(-30.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    float f = std::ldexp(1.0f, 0) * std::exp2(mag(rng)) * ((i & 1) ? -1.0f : 1.0f);
    double a = std::fabs(static_cast<double>(f));
    uint16_t got = F32ToF16(f);
    if (a >= 65520.0) {
      ASSERT_TRUE(std::isinf(F16ToF32(got))) << f;
      continue;
    }
    uint32_t want = ref.Nearest(a) | (std::signbit(f) ? 0x8000u : 0u);
    ASSERT_EQ(got, want) << "f=" << f;
  }
  // exact ties: halfway between 1 and 1+2^-10 -> even (1.0)
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Fp8E4M3Fn, DecodeTableFacts) {
  EXPECT_EQ(Fp8E4M3FnToF32(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4M3FnToF32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(Fp8E4M3FnToF32(0x7f)));
  EXPECT_TRUE(std::isnan(Fp8E4M3FnToF32(0xff)));
  EXPECT_EQ(Fp8E4M3FnToF32(0x08), std::ldexp(1.0f, -6));  // min normal
  EXPECT_EQ(Fp8E4M3FnToF32(0x01), std::ldexp(1.0f, -9));  // min subnormal
  EXPECT_EQ(Fp8E4M3FnToF32(0x38), 1.0f);
  EXPECT_TRUE(std::signbit(Fp8E4M3FnToF32(0x80)));  // -0 exists
}

TEST(Fp8E4M3Fnuz, DecodeTableFacts) {
  EXPECT_EQ(Fp8E4M3FnuzToF32(0x7f), 240.0f);
  EXPECT_TRUE(std::isnan(Fp8E4M3FnuzToF32(0x80)));
  EXPECT_EQ(Fp8E4M3FnuzToF32(0x08), std::ldexp(1.0f, -7));
  EXPECT_EQ(Fp8E4M3FnuzToF32(0x01), std::ldexp(1.0f, -10));
  EXPECT_EQ(Fp8E4M3FnuzToF32(0x40), 1.0f);
  // same bit pattern: fnuz value = fn value / 2
  for (uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f || c == 0x80) continue;
    EXPECT_EQ(Fp8E4M3FnuzToF32(c), Fp8E4M3FnToF32(c) / 2) << c;
  }
}

void CheckFp8(Fp8Kind kind) {
  auto decode = [kind](uint32_t c) { return Fp8ToF32(static_cast<uint8_t>(c), kind); };
  // every code round-trips
  for (uint32_t c = 0; c < 256; ++c) {
    float f = decode(c);
    uint8_t back = F32ToFp8(f, kind);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(decode(back)));
    } else if (kind == Fp8Kind::kE4M3FNUZ && c == 0x80) {
      continue;
    } else {
      EXPECT_EQ(back, c) << "code " << c;
    }
  }
  RefFormat ref(256, 0x80, decode);
  const float max = Fp8Max(kind);
  EXPECT_EQ(ref.Max(), max);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> lg(-14.0f, 10.0f);
  for (int i = 0; i < 100000; ++i) {
    float f = std::exp2(lg(rng)) * ((i & 1) ? -1.0f : 1.0f);
    uint8_t got = F32ToFp8(f, kind);
    double a = std::min<double>(std::fabs(f), max);  // saturation
    uint32_t mag = ref.Nearest(a);
    uint32_t want = (std::signbit(f) && mag != 0) || (std::signbit(f) && kind == Fp8Kind::kE4M3FN)
                        ? (mag | 0x80)
                        : mag;
    ASSERT_EQ(got, want) << "f=" << f;
    ASSERT_FALSE(std::isnan(decode(got))) << "saturating encode never produces NaN, f=" << f;
  }
  // saturation, including the values that PyTorch turns into NaN
  for (float big : {max + 1.0f, 464.5f, 480.0f, 1e6f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(decode(F32ToFp8(big, kind)), max) << big;
    EXPECT_EQ(decode(F32ToFp8(-big, kind)), -max) << big;
  }
  EXPECT_TRUE(std::isnan(decode(F32ToFp8(std::numeric_limits<float>::quiet_NaN(), kind))));
}

TEST(Fp8E4M3Fn, ExhaustiveAndRandom) { CheckFp8(Fp8Kind::kE4M3FN); }
TEST(Fp8E4M3Fnuz, ExhaustiveAndRandom) { CheckFp8(Fp8Kind::kE4M3FNUZ); }

TEST(Fp8E4M3Fnuz, NoNegativeZero) { EXPECT_EQ(F32ToFp8E4M3Fnuz(-0.0f), 0x00); }

TEST(E8M0, EveryCode) {
  for (uint32_t e = 0; e < 256; ++e) {
    float v = E8M0ToF32(static_cast<uint8_t>(e));
    if (e == 255) {
      EXPECT_TRUE(std::isnan(v));
    } else {
      EXPECT_EQ(v, std::ldexp(1.0f, static_cast<int>(e) - 127)) << e;
      EXPECT_GT(v, 0.0f) << "2^-127 is a subnormal, never flushed to zero";
    }
  }
  EXPECT_EQ(E8M0ToF32(127), 1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(E8M0ToF32(0)), 0x00400000u);
}

TEST(E2M1, EveryCodeAndThresholdTable) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint8_t c = 0; c < 16; ++c) {
    float v = E2M1ToF32(c);
    EXPECT_EQ(std::fabs(v), mags[c & 7]);
    EXPECT_EQ(std::signbit(v), (c & 8) != 0);
    EXPECT_EQ(F32ToE2M1(v), c) << "code round-trips (Quark keeps -0 as code 8)";
  }
  // the reference doc's tie table (RNE column)
  struct Case {
    float in;
    float out;
  } cases[] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1},   {1.75f, 2}, {2.5f, 2},
               {3.5f, 4},  {5.0f, 4},  {-0.75f, -1}, {6.5f, 6},  {7.9f, 6}};
  for (auto c : cases) EXPECT_EQ(E2M1ToF32(F32ToE2M1(c.in)), c.out) << c.in;
  // random values against the table reference
  RefFormat ref(16, 0x8, [](uint32_t c) { return E2M1ToF32(static_cast<uint8_t>(c)); });
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  for (int i = 0; i < 100000; ++i) {
    float f = u(rng);
    uint32_t mag = ref.Nearest(std::min(std::fabs(f), 6.0f));
    uint32_t want = mag | (std::signbit(f) ? 0x8u : 0u);
    ASSERT_EQ(F32ToE2M1(f), want) << f;
  }
}

}  // namespace
}  // namespace mx
