#include "engine/cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/engine_test_util.h"

namespace mx::cache_manager_test {
namespace {

constexpr int64_t kPage = 4;

SchedulerConfig Config(int64_t n_pages) {
  SchedulerConfig c;
  c.page_size = kPage;
  c.n_pages = n_pages;
  c.kv_dtype = KvCacheDtype::kF32;
  return c;
}

ScheduledRequest Request(RequestId id, int n_tokens, int first_token = 1) {
  ScheduledRequest r(SamplingParams{});
  r.id = id;
  r.tokens.resize(n_tokens);
  std::iota(r.tokens.begin(), r.tokens.end(), first_token);
  return r;
}

// A request that computed its n tokens and finished: its pages go into the radix cache.
void RunAndCache(CacheManager& cm, ScheduledRequest& r) {
  ASSERT_TRUE(cm.CanGrow(r.seq(), std::ssize(r.tokens)));
  cm.Grow(r.seq(), std::ssize(r.tokens));
  r.kv_len = std::ssize(r.tokens);
  cm.Release(r, /*cache=*/true);
}

TEST(CacheManager, CanGrowCountsEvictablePagesAndGrowEvictsThem) {
  CacheManager cm(TinyTestConfig(), Config(4));
  ScheduledRequest a = Request(1, 2 * kPage);
  RunAndCache(cm, a);
  EXPECT_EQ(cm.pool().free_pages(), 2);
  EXPECT_EQ(cm.radix().evictable_pages(), 2);
  EXPECT_EQ(cm.obtainable_pages(), 4);

  EXPECT_FALSE(cm.CanGrow(2, 4 * kPage + 1));
  ASSERT_TRUE(cm.CanGrow(2, 4 * kPage));
  cm.Grow(2, 4 * kPage);  // two free pages, two evicted
  EXPECT_EQ(cm.held_pages(2), 4);
  EXPECT_EQ(cm.radix().cached_pages(), 0);
  EXPECT_FALSE(cm.CanGrow(3, 1));
  EXPECT_TRUE(cm.CanGrow(2, 4 * kPage));  // already held
}

TEST(CacheManager, ALockedPrefixIsNotObtainableUntilUnlocked) {
  CacheManager cm(TinyTestConfig(), Config(4));
  ScheduledRequest a = Request(1, 2 * kPage);
  RunAndCache(cm, a);
  ScheduledRequest b = Request(2, 2 * kPage + 1);
  const RadixCache::MatchResult m = cm.LockPrefix(std::span<const int32_t>(b.tokens).first(8));
  EXPECT_EQ(m.tokens, 2 * kPage);
  EXPECT_EQ(cm.obtainable_pages(), 2);
  EXPECT_FALSE(cm.CanGrow(3, 3 * kPage));
  cm.UnlockPrefix(m);
  EXPECT_TRUE(cm.CanGrow(3, 3 * kPage));
}

TEST(CacheManager, AdmitStartsFromThePrefixAndCanAdmitCountsTheReservation) {
  CacheManager cm(TinyTestConfig(), Config(4));
  ScheduledRequest a = Request(1, 2 * kPage);
  RunAndCache(cm, a);
  ScheduledRequest b = Request(2, 3 * kPage);
  const RadixCache::MatchResult m = cm.LockPrefix(std::span<const int32_t>(b.tokens).first(11));
  ASSERT_EQ(m.pages.size(), 2u);
  // b needs 4 pages, 2 of them from the prefix; 2 are free.
  EXPECT_TRUE(cm.CanAdmit(m, 4 * kPage, /*reserved_pages=*/0));
  EXPECT_FALSE(cm.CanAdmit(m, 4 * kPage, /*reserved_pages=*/1));
  EXPECT_FALSE(cm.CanAdmit(m, 4 * kPage + 1, /*reserved_pages=*/0));
  cm.Admit(b, m);
  EXPECT_EQ(b.kv_len, 2 * kPage);
  EXPECT_EQ(cm.held_pages(b.seq()), 2);
  EXPECT_EQ(cm.pool().refcount(m.pages[0]), 2);  // the tree's and b's
  cm.Release(b, /*cache=*/false);
  EXPECT_EQ(cm.pool().refcount(m.pages[0]), 1);
  EXPECT_EQ(cm.radix().evictable_pages(), 2);
  EXPECT_TRUE(cm.radix().CheckInvariants());
}

TEST(CacheManager, FitShrinksToHeldPlusExtraPages) {
  CacheManager cm(TinyTestConfig(), Config(8));
  cm.Grow(1, kPage + 1);  // 2 pages: positions [0, 8)
  EXPECT_EQ(cm.Fit(1, 3, 100, /*extra_pages=*/0), 2 * kPage - 3);
  EXPECT_EQ(cm.Fit(1, 3, 100, /*extra_pages=*/2), 4 * kPage - 3);
  EXPECT_EQ(cm.Fit(1, 3, 2, /*extra_pages=*/0), 2);  // at most n
  EXPECT_LE(cm.Fit(1, 2 * kPage, 5, /*extra_pages=*/0), 0);
  // What Fit grants with the obtainable pages, Grow can take.
  const int64_t n = cm.Fit(1, 3, 100, cm.obtainable_pages());
  ASSERT_TRUE(cm.CanGrow(1, 3 + n));
  EXPECT_FALSE(cm.CanGrow(1, 3 + n + 1));
}

TEST(CacheManager, DisabledRadixCachesNothing) {
  SchedulerConfig c = Config(4);
  c.disable_radix_cache = true;
  CacheManager cm(TinyTestConfig(), c);
  ScheduledRequest a = Request(1, 2 * kPage);
  RunAndCache(cm, a);
  EXPECT_EQ(cm.radix().cached_pages(), 0);
  EXPECT_EQ(cm.pool().free_pages(), 4);
  const RadixCache::MatchResult m = cm.LockPrefix(a.tokens);
  EXPECT_EQ(m.tokens, 0);
  EXPECT_EQ(m.node, nullptr);
}

}  // namespace
}  // namespace mx::cache_manager_test
