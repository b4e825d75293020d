// The Responses store: LRU eviction by count and by bytes, Get refreshing recency, Delete.
#include "server/response_store.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

StoredResponse Entry(size_t text_bytes) {
  StoredResponse r;
  r.response = {{"text", std::string(text_bytes, 'x')}};
  r.input_items = nlohmann::ordered_json::array();
  r.conversation = nlohmann::ordered_json::array();
  return r;
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsedPastTheCount) {
  ResponseStore s({.max_count = 2, .max_bytes = 1 << 20});
  s.Put("a", Entry(1));
  s.Put("b", Entry(1));
  ASSERT_NE(s.Get("a"), nullptr);  // a is now more recent than b
  s.Put("c", Entry(1));
  EXPECT_EQ(s.count(), 2u);
  EXPECT_NE(s.Get("a"), nullptr);
  EXPECT_EQ(s.Get("b"), nullptr);
  EXPECT_NE(s.Get("c"), nullptr);
}

TEST(ResponseStore, EvictsPastTheBytesAndKeepsNothingTooLarge) {
  ResponseStore s({.max_count = 100, .max_bytes = 2500});
  s.Put("a", Entry(1000));
  s.Put("b", Entry(1000));
  EXPECT_EQ(s.count(), 2u);
  s.Put("c", Entry(1000));
  EXPECT_EQ(s.count(), 2u);
  EXPECT_EQ(s.Get("a"), nullptr);
  EXPECT_LE(s.bytes(), 2500u);
  s.Put("huge", Entry(5000));
  EXPECT_EQ(s.Get("huge"), nullptr);
  EXPECT_EQ(s.count(), 2u);
}

TEST(ResponseStore, DeleteAndReplace) {
  ResponseStore s({.max_count = 10, .max_bytes = 1 << 20});
  s.Put("a", Entry(10));
  const size_t one = s.bytes();
  s.Put("a", Entry(10));
  EXPECT_EQ(s.count(), 1u);
  EXPECT_EQ(s.bytes(), one);
  EXPECT_TRUE(s.Delete("a"));
  EXPECT_FALSE(s.Delete("a"));
  EXPECT_EQ(s.Get("a"), nullptr);
  EXPECT_EQ(s.bytes(), 0u);
}

TEST(ResponseStore, ACountOfZeroKeepsNone) {
  ResponseStore s({.max_count = 0, .max_bytes = 1 << 20});
  s.Put("a", Entry(1));
  EXPECT_EQ(s.Get("a"), nullptr);
}

}  // namespace
}  // namespace mx::server
