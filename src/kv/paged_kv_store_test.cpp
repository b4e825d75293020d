// PagedKvStore: page-table addressing, the bf16 / fp8 codecs (round trip error, saturation),
// bytes per token.
#include "kv/paged_kv_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "io/model_config.h"

namespace mx {
namespace {

ModelConfig TinyConfig() {
  auto c = LoadModelConfig(std::string(MX_TEST_DATA_DIR) + "/tiny/config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(PagedKvStore, RowsLandInTheirPages) {
  const ModelConfig c = TinyConfig();
  const int64_t W = c.mla_cache_values(), Di = c.index_head_dim;
  PagedKvStore kv(c, 4, 8, KvCacheDtype::kF32);
  EXPECT_EQ(kv.n_layers(), c.num_hidden_layers + 1);
  kv.PageTable(0) = {5, 2};
  kv.PageTable(1) = {2 + 1};
  EXPECT_TRUE(kv.Reserve(0, 8).ok());
  EXPECT_EQ(kv.Reserve(0, 9).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.Reserve(7, 1).code(), StatusCode::kNotFound);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> a(W), b(W), k(Di), out(W);
  for (auto& x : a) x = nd(rng);
  for (auto& x : b) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  kv.WriteMlaRow(0, 1, 6, a.data());
  kv.WriteMlaRow(1, 1, 2, b.data());
  kv.WriteIndexerKeyRow(0, c.mtp_layer_index(), 6, k.data());  // the MTP layer is full
  kv.ReadMlaRow(0, 1, 6, out.data());
  EXPECT_EQ(out, a);
  kv.ReadMlaRow(1, 1, 2, out.data());
  EXPECT_EQ(out, b);
  std::vector<float> ko(Di);
  kv.ReadIndexerKeyRow(0, c.mtp_layer_index(), 6, ko.data());
  EXPECT_EQ(ko, k);
  // A sequence whose table shares page 2 (a radix-cache hit) reads the row written through seq 0.
  kv.PageTable(2) = {0, 2};
  kv.ReadMlaRow(2, 1, 6, out.data());
  EXPECT_EQ(out, a);
}

TEST(PagedKvStore, NarrowDtypesRoundTripWithinTheirPrecision) {
  const ModelConfig c = TinyConfig();
  const int64_t W = c.mla_cache_values();
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  std::vector<float> x(W), y(W);
  for (auto& v : x) v = nd(rng) * 3.0f;
  struct Case {
    KvCacheDtype d;
    double rel;  // max relative error of one value (normal range)
  };
  for (Case cs : {Case{KvCacheDtype::kBf16, 1.0 / 256}, Case{KvCacheDtype::kFp8E4M3Fn, 1.0 / 16},
                  Case{KvCacheDtype::kFp8E4M3Fnuz, 1.0 / 16}}) {
    std::vector<float> scales(c.num_hidden_layers + 1, 0.5f);
    PagedKvStore kv(c, 2, 2, cs.d, scales);
    kv.PageTable(0) = {1};
    kv.WriteMlaRow(0, 0, 1, x.data());
    kv.ReadMlaRow(0, 0, 1, y.data());
    for (int64_t i = 0; i < W; ++i) {
      if (std::fabs(x[i]) < 0.1f) continue;  // subnormal range: absolute error instead
      EXPECT_LE(std::fabs(y[i] - x[i]), cs.rel * std::fabs(x[i]) + 1e-6)
          << KvCacheDtypeName(cs.d) << " " << x[i];
    }
  }
}

TEST(PagedKvStore, Fp8SaturatesInsteadOfOverflowing) {
  const ModelConfig c = TinyConfig();
  const int64_t W = c.mla_cache_values();
  std::vector<float> x(W, 1e6f), y(W);
  x[1] = -1e6f;
  PagedKvStore fn(c, 1, 1, KvCacheDtype::kFp8E4M3Fn,
                  std::vector<float>(c.num_hidden_layers + 1, 2));
  fn.PageTable(0) = {0};
  fn.WriteMlaRow(0, 0, 0, x.data());
  fn.ReadMlaRow(0, 0, 0, y.data());
  EXPECT_EQ(y[0], 896.0f);  // 448 · scale 2
  EXPECT_EQ(y[1], -896.0f);
  PagedKvStore fnuz(c, 1, 1, KvCacheDtype::kFp8E4M3Fnuz);
  fnuz.PageTable(0) = {0};
  fnuz.WriteMlaRow(0, 0, 0, x.data());
  fnuz.ReadMlaRow(0, 0, 0, y.data());
  EXPECT_EQ(y[0], 240.0f);
}

TEST(PagedKvStore, BytesPerTokenAndDtypeNames) {
  const ModelConfig c = TinyConfig();
  // 5 layers × (16 + 8) MLA values + 4 full indexer layers (0, 1, 3, MTP) × 16.
  EXPECT_EQ(PagedKvStore::BytesPerToken(c, KvCacheDtype::kBf16), (5 * 24 + 4 * 16) * 2);
  EXPECT_EQ(PagedKvStore::BytesPerToken(c, KvCacheDtype::kFp8E4M3Fn) * 2,
            PagedKvStore::BytesPerToken(c, KvCacheDtype::kBf16));
  EXPECT_EQ(*ParseKvCacheDtype("auto"), KvCacheDtype::kBf16);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e4m3"), KvCacheDtype::kFp8E4M3Fn);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e4m3fnuz"), KvCacheDtype::kFp8E4M3Fnuz);
  EXPECT_FALSE(ParseKvCacheDtype("int4").ok());
}

TEST(PagedKvStore, PageLayoutIsWhatAMirrorNeeds) {
  const ModelConfig c = TinyConfig();
  std::vector<float> scales(c.num_hidden_layers + 1);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + static_cast<float>(i);
  PagedKvStore kv(c, 4, 8, KvCacheDtype::kFp8E4M3Fn, scales);
  kv.PageTable(3) = {6, 1};
  kv.PageTable(5) = {2};
  const std::vector<int64_t> seqs = {5, 9, 3};
  Result<KvPageLayout> l = kv.PageLayout(seqs);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->page_size, 4);
  EXPECT_EQ(l->n_pages, 8);
  EXPECT_EQ(l->dtype, KvCacheDtype::kFp8E4M3Fn);
  EXPECT_EQ(l->layer_scales, scales);
  EXPECT_EQ(l->tables, (std::vector<std::vector<int32_t>>{{2}, {}, {6, 1}}));
  EXPECT_EQ(kv.PageCount(9), 0);  // asking did not create a table
  ContiguousKvStore flat(c, 8);
  EXPECT_EQ(flat.PageLayout(seqs).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace mx
