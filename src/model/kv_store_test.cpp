// ContiguousKvStore: row addressing per (sequence, layer, position), capacity errors, and
// fresh rows poisoned with NaN.
#include "model/kv_store.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/model_test_util.h"

namespace mx {
namespace {

TEST(ContiguousKvStore, RowsAreDistinctAndPoisoned) {
  const ModelConfig& c = TestModel("tiny-glm52").config();
  ContiguousKvStore kv(c, 16);
  const int64_t a = kv.AddSequence(), b = kv.AddSequence();
  ASSERT_TRUE(kv.Reserve(a, 4).ok());
  ASSERT_TRUE(kv.Reserve(b, 2).ok());
  EXPECT_TRUE(std::isnan(kv.MlaRow(a, 0, 3)[0]));
  kv.MlaRow(a, 0, 3)[0] = 1.0f;
  kv.MlaRow(b, 0, 1)[0] = 2.0f;
  kv.IndexerKeyRow(a, 6, 2)[c.index_head_dim - 1] = 3.0f;
  kv.MlaRow(a, c.mtp_layer_index(), 3)[c.mla_cache_values() - 1] = 4.0f;  // the MTP layer
  ASSERT_TRUE(kv.Reserve(a, 10).ok());  // growing keeps what was written
  EXPECT_EQ(kv.MlaRow(a, 0, 3)[0], 1.0f);
  EXPECT_EQ(kv.MlaRow(b, 0, 1)[0], 2.0f);
  EXPECT_EQ(kv.IndexerKeyRow(a, 6, 2)[c.index_head_dim - 1], 3.0f);
  EXPECT_EQ(kv.MlaRow(a, c.mtp_layer_index(), 3)[c.mla_cache_values() - 1], 4.0f);
  EXPECT_TRUE(std::isnan(kv.MlaRow(a, 1, 3)[0]));
}

TEST(ContiguousKvStore, CapacityAndUnknownSequenceAreStatuses) {
  const ModelConfig& c = TestModel("tiny").config();
  ContiguousKvStore kv(c, 8);
  const int64_t a = kv.AddSequence();
  EXPECT_EQ(kv.Reserve(a, 9).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.Reserve(a + 1, 1).code(), StatusCode::kNotFound);
  kv.RemoveSequence(a);
  EXPECT_EQ(kv.Reserve(a, 1).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace mx
