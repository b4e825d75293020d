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
  auto f8 = FindQuantFormat("fp8");
  ASSERT_TRUE(f8.ok());
  EXPECT_EQ(*f8, &Fp8Format());
  EXPECT_EQ((*f8)->block, 128);
  EXPECT_EQ((*f8)->block_rows, 128);
  EXPECT_EQ((*f8)->code_dtype, DType::kF8_E4M3);
  EXPECT_EQ((*f8)->scale_dtype, DType::kF32);
  EXPECT_EQ(std::string((*f8)->scale_suffix), "_scale_inv");
  auto bad = FindQuantFormat("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("int4"), std::string::npos);
  EXPECT_NE(bad.status().message().find("mxfp4, fp8"), std::string::npos);
  EXPECT_EQ(QuantFormats().size(), 2u);
}

TEST(QuantFormat, Mxfp4CodecIsTheReferenceCodec) {
  const QuantFormat& f = Mxfp4Format();
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g(0.0f, 3.0f);
  const int64_t k = 96, rows = 3;
  std::vector<float> x(rows * k);
  std::vector<uint16_t> xb(rows * k);
  for (int64_t i = 0; i < rows * k; ++i) {
    xb[i] = F32ToBf16(g(rng));
    x[i] = Bf16ToF32(xb[i]);  // the quantizer widens bf16 rows to fp32 before encoding
  }
  for (ScaleMode mode : {ScaleMode::kEven, ScaleMode::kFloor}) {
    std::vector<uint8_t> c1(rows * k / 2), s1(rows * k / 32), c2(rows * k / 2), s2(rows * k / 32);
    ASSERT_TRUE(f.encode(x.data(), rows, k, mode, 0, c1.data(), s1.data()).ok());
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(
          QuantizeRowBf16(xb.data() + r * k, k, mode, c2.data() + r * k / 2, s2.data() + r * k / 32)
              .ok());
    }
    EXPECT_EQ(c1, c2);
    EXPECT_EQ(s1, s2);
    std::vector<float> d1(rows * k), d2(rows * k);
    f.decode(c1.data(), s1.data(), rows, k, d1.data());
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(c1.data() + r * k / 2, s1.data() + r * k / 32, k, d2.data() + r * k);
    }
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
