// RadixCache: match, split, insert, lock safety, LRU eviction order, reference counting.
#include "kv/radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace mx {
namespace {

std::vector<int32_t> Seq(std::initializer_list<int32_t> v) { return v; }

// Takes n fresh pages from the pool (the caller's references).
std::vector<int32_t> Take(PagePool& pool, int64_t n) {
  std::vector<int32_t> p;
  EXPECT_TRUE(pool.Alloc(n, p));
  return p;
}
void Drop(PagePool& pool, const std::vector<int32_t>& pages) {
  for (int32_t p : pages) pool.Unref(p);
}

TEST(RadixCache, InsertThenMatchIsPageAligned) {
  PagePool pool(16);
  RadixCache rc(2, pool);
  const auto toks = Seq({1, 2, 3, 4, 5, 6, 7});  // 3 whole pages + 1 token
  auto pages = Take(pool, 4);
  EXPECT_EQ(rc.Insert(toks, pages).existing_tokens, 0);
  Drop(pool, pages);
  EXPECT_EQ(rc.cached_pages(), 3);
  EXPECT_EQ(pool.used_pages(), 3);  // the partial page went back to the pool
  auto m = rc.Match(Seq({1, 2, 3, 4, 9, 9}));
  EXPECT_EQ(m.tokens, 4);
  EXPECT_EQ(m.pages, (std::vector<int32_t>{pages[0], pages[1]}));
  EXPECT_EQ(rc.Match(Seq({1, 2, 3})).tokens, 2);  // a partial page never matches
  EXPECT_EQ(rc.Match(Seq({1})).tokens, 0);
  EXPECT_EQ(rc.Match(Seq({2, 1})).tokens, 0);
  EXPECT_TRUE(rc.CheckInvariants());
}

TEST(RadixCache, MatchInsideANodeSplitsIt) {
  PagePool pool(16);
  RadixCache rc(2, pool);
  auto a = Take(pool, 3);
  rc.Insert(Seq({1, 1, 2, 2, 3, 3}), a);
  Drop(pool, a);
  EXPECT_EQ(rc.node_count(), 1);
  auto m = rc.Match(Seq({1, 1, 2, 2, 4, 4}));
  EXPECT_EQ(m.tokens, 4);
  EXPECT_EQ(rc.node_count(), 2);  // [1 1 2 2] → [3 3]
  auto b = Take(pool, 3);
  auto r = rc.Insert(Seq({1, 1, 2, 2, 4, 4}), b);
  Drop(pool, b);
  EXPECT_EQ(r.existing_tokens, 4);
  EXPECT_EQ(rc.node_count(), 3);  // [1 1 2 2] → {[3 3], [4 4]}
  EXPECT_EQ(rc.cached_pages(), 4);
  EXPECT_EQ(pool.used_pages(), 4);  // b's first two pages were duplicates and are free again
  EXPECT_EQ(rc.Match(Seq({1, 1, 2, 2, 3, 3})).pages, a);
  EXPECT_EQ(rc.Match(Seq({1, 1, 2, 2, 4, 4})).pages, (std::vector<int32_t>{a[0], a[1], b[2]}));
  EXPECT_TRUE(rc.CheckInvariants());
}

TEST(RadixCache, LockedPathsAreNeverEvicted) {
  PagePool pool(16);
  RadixCache rc(1, pool);
  auto a = Take(pool, 3);
  rc.Insert(Seq({1, 2, 3}), a);
  Drop(pool, a);
  auto m = rc.Match(Seq({1, 2}));  // splits: [1 2] locked, [3] free
  rc.Lock(m.node);
  EXPECT_EQ(rc.evictable_pages(), 1);
  EXPECT_EQ(rc.Flush(), 1);
  EXPECT_EQ(rc.cached_pages(), 2);
  EXPECT_EQ(rc.Match(Seq({1, 2, 3})).tokens, 2);
  // Inserting below a locked node then splitting it keeps the lock on the whole path.
  auto b = Take(pool, 3);
  rc.Insert(Seq({1, 2, 5}), b);
  Drop(pool, b);
  auto m2 = rc.Match(Seq({1, 9}));  // splits [1 2] into [1] → [2]
  EXPECT_EQ(m2.tokens, 1);
  EXPECT_EQ(rc.evictable_pages(), 1);
  EXPECT_EQ(rc.Flush(), 1);
  EXPECT_EQ(rc.cached_pages(), 2);
  rc.Unlock(m.node);
  EXPECT_EQ(rc.evictable_pages(), 2);
  EXPECT_EQ(rc.Flush(), 2);
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_TRUE(rc.CheckInvariants());
}

TEST(RadixCache, EvictsLeastRecentlyUsedLeavesFirst) {
  PagePool pool(16);
  RadixCache rc(1, pool);
  for (int32_t first : {10, 20, 30}) {
    auto p = Take(pool, 2);
    rc.Insert(Seq({first, first + 1}), p);
    Drop(pool, p);
  }
  rc.Match(Seq({10, 11}));    // 10 is now the most recent; 20 the oldest
  EXPECT_EQ(rc.Evict(1), 2);  // a whole leaf goes at once
  EXPECT_EQ(rc.Match(Seq({20, 21})).tokens, 0);
  EXPECT_EQ(rc.Match(Seq({30, 31})).tokens, 2);  // refreshes 30
  EXPECT_EQ(rc.Evict(1), 2);
  EXPECT_EQ(rc.Match(Seq({10, 11})).tokens, 0);
  EXPECT_EQ(rc.Match(Seq({30, 31})).tokens, 2);
  EXPECT_TRUE(rc.CheckInvariants());
}

TEST(RadixCache, InnerNodesBecomeEvictableAfterTheirChildren) {
  PagePool pool(16);
  RadixCache rc(1, pool);
  auto a = Take(pool, 3), b = Take(pool, 3);
  rc.Insert(Seq({1, 2, 3}), a);
  rc.Insert(Seq({1, 2, 4}), b);
  Drop(pool, a);
  Drop(pool, b);
  EXPECT_EQ(rc.cached_pages(), 4);
  EXPECT_EQ(rc.Evict(4), 4);
  EXPECT_EQ(rc.cached_pages(), 0);
  EXPECT_EQ(rc.node_count(), 0);
}

TEST(RadixCache, PagesSharedWithARequestAreNotFreedByEviction) {
  PagePool pool(4);
  RadixCache rc(1, pool);
  auto a = Take(pool, 2);
  rc.Insert(Seq({1, 2}), a);  // the "request" still holds a
  EXPECT_EQ(rc.Flush(), 0);   // unreferenced by the tree but still in use
  EXPECT_EQ(pool.used_pages(), 2);
  Drop(pool, a);
  EXPECT_EQ(pool.used_pages(), 0);
}

TEST(RadixCache, RandomOperationsKeepInvariantsAndLeakNothing) {
  std::mt19937 rng(7);
  PagePool pool(64);
  {
    RadixCache rc(2, pool);
    std::vector<RadixCache::Node*> locked;
    for (int it = 0; it < 3000; ++it) {
      std::vector<int32_t> toks(rng() % 12);
      for (auto& t : toks) t = static_cast<int32_t>(rng() % 3);
      const int op = static_cast<int>(rng() % 4);
      if (op == 0) {
        const int64_t n = static_cast<int64_t>(toks.size()) / 2;
        if (pool.free_pages() < n) rc.Evict(n - pool.free_pages());
        std::vector<int32_t> p;
        if (!pool.Alloc(n, p)) continue;
        rc.Insert(toks, p);
        Drop(pool, p);
      } else if (op == 1) {
        auto m = rc.Match(toks);
        rc.Lock(m.node);
        locked.push_back(m.node);
      } else if (op == 2 && !locked.empty()) {
        rc.Unlock(locked.back());
        locked.pop_back();
      } else {
        rc.Evict(static_cast<int64_t>(rng() % 4));
      }
      ASSERT_TRUE(rc.CheckInvariants()) << "op " << it;
      ASSERT_EQ(pool.used_pages(), rc.cached_pages());
    }
    for (auto* n : locked) rc.Unlock(n);
    rc.Flush();
    EXPECT_EQ(rc.cached_pages(), 0);
  }
  EXPECT_EQ(pool.used_pages(), 0);
}

}  // namespace
}  // namespace mx
