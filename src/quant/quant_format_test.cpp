// The quantized-format table: lookup by --format name, the MXFP4 entry's codec against the
// MXFP4 reference codec on fresh random rows, and the quantizer refusing an unknown format.
#include "quant/quant_format.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "base/numerics.h"
#include "quant/quantizer.h"

namespace mx::quant::quant_format_test {
namespace {

TEST(QuantFormat, LookupByName) {
  auto m = FindQuantFormat("mxfp4");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, &Mxfp4Format());
  EXPECT_EQ((*m)->block, 32);
  EXPECT_EQ((*m)->code_bytes, 16);
  EXPECT_EQ(std::string((*m)->scale_suffix), "_scale");
  auto bad = FindQuantFormat("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fp8"), std::string::npos);
  EXPECT_NE(bad.status().message().find("mxfp4"), std::string::npos);
  EXPECT_EQ(QuantFormats().size(), 1u);
}

TEST(QuantFormat, Mxfp4CodecIsTheReferenceCodec) {
  const QuantFormat& f = Mxfp4Format();
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g(0.0f, 3.0f);
  const int64_t k = 96;
  std::vector<float> x(k);
  std::vector<uint16_t> xb(k);
  for (int64_t i = 0; i < k; ++i) {
    x[i] = g(rng);
    xb[i] = F32ToBf16(x[i]);
  }
  for (ScaleMode mode : {ScaleMode::kEven, ScaleMode::kFloor}) {
    std::vector<uint8_t> c1(k / 2), s1(k / 32), c2(k / 2), s2(k / 32);
    ASSERT_TRUE(f.encode_f32(x.data(), k, mode, c1.data(), s1.data()).ok());
    ASSERT_TRUE(QuantizeRow(x.data(), k, mode, c2.data(), s2.data()).ok());
    EXPECT_EQ(c1, c2);
    EXPECT_EQ(s1, s2);
    ASSERT_TRUE(f.encode_bf16(xb.data(), k, mode, c1.data(), s1.data()).ok());
    ASSERT_TRUE(QuantizeRowBf16(xb.data(), k, mode, c2.data(), s2.data()).ok());
    EXPECT_EQ(c1, c2);
    EXPECT_EQ(s1, s2);
    std::vector<float> d1(k), d2(k);
    f.decode(c1.data(), s1.data(), k, d1.data());
    DequantizeRow(c1.data(), s1.data(), k, d2.data());
    EXPECT_EQ(d1, d2);
  }
}

TEST(QuantFormat, QuantizerRefusesAnUnknownFormatBeforeWriting) {
  namespace fs = std::filesystem;
  const fs::path out = fs::path(::testing::TempDir()) / "mx_quant_format_unknown";
  fs::remove_all(out);
  QuantizeOptions o;
  o.format = "int3";
  auto r = QuantizeCheckpoint(std::string(MX_TEST_DATA_DIR) + "/tiny", out.string(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("int3"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace mx::quant::quant_format_test
