// The router's policies on synthetic loads and prompts, and its prefix tree against a brute-force
// longest-common-prefix reference on fresh random prompts.
#include "parallel/dp_router.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace mx {
namespace {

std::vector<int32_t> RandomPrompt(std::mt19937& rng, size_t len, int vocab) {
  std::vector<int32_t> p(len);
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % vocab);
  return p;
}

TEST(DpRouter, ParsesMethodsAndNamesTheFlag) {
  EXPECT_EQ(*ParseLoadBalanceMethod("round_robin"), LoadBalanceMethod::kRoundRobin);
  EXPECT_EQ(*ParseLoadBalanceMethod("least_load"), LoadBalanceMethod::kLeastLoad);
  EXPECT_EQ(*ParseLoadBalanceMethod("cache_aware"), LoadBalanceMethod::kCacheAware);
  auto bad = ParseLoadBalanceMethod("random");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--load-balance-method 'random'"), std::string::npos)
      << bad.status().message();
}

TEST(DpRouter, RoundRobinIgnoresLoad) {
  DpRouter r(3, {.method = LoadBalanceMethod::kRoundRobin});
  const std::vector<int64_t> loads = {9, 0, 5};
  std::vector<int> got;
  for (int i = 0; i < 7; ++i) got.push_back(r.Route({}, loads).replica);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(DpRouter, LeastLoadPicksTheLeastLoadedAndSpreadsTies) {
  DpRouter r(3, {.method = LoadBalanceMethod::kLeastLoad});
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.Route({}, std::vector<int64_t>{3, 1, 2}).replica, 1);
    EXPECT_EQ(r.Route({}, std::vector<int64_t>{0, 4, 4}).replica, 0);
    EXPECT_EQ(r.Route({}, std::vector<int64_t>{7, 7, 6}).replica, 2);
  }
  // Equal loads: successive calls visit every replica.
  std::set<int> seen;
  for (int i = 0; i < 3; ++i) seen.insert(r.Route({}, std::vector<int64_t>{2, 2, 2}).replica);
  EXPECT_EQ(seen.size(), 3u);
  // Simulated in-flight counts stay balanced.
  std::vector<int64_t> loads(3, 0);
  for (int i = 0; i < 30; ++i) ++loads[r.Route({}, loads).replica];
  EXPECT_EQ(loads, (std::vector<int64_t>{10, 10, 10}));
}

TEST(DpRouter, CacheAwareFollowsSharedPrefixesAndSpreadsUnrelatedPrompts) {
  std::mt19937 rng(7);
  DpRouter r(4, {.method = LoadBalanceMethod::kCacheAware});
  std::vector<int64_t> loads(4, 0);
  // Unrelated prompts (no shared prefix) go by load: all replicas get some.
  std::vector<int> owner;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(RandomPrompt(rng, 100, 50000));
    auto d = r.Route(prompts.back(), loads);
    EXPECT_EQ(d.matched_tokens, 0);
    r.Record(prompts.back(), d.replica);
    ++loads[d.replica];
    owner.push_back(d.replica);
  }
  EXPECT_EQ(loads, (std::vector<int64_t>{2, 2, 2, 2}));
  // A prompt sharing 80 of 100 tokens with prompt i follows it, even to a busier replica.
  loads[owner[3]] += 5;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p(prompts[i].begin(), prompts[i].begin() + 80);
    std::vector<int32_t> tail = RandomPrompt(rng, 20, 50000);
    p.insert(p.end(), tail.begin(), tail.end());
    auto d = r.Route(p, loads);
    EXPECT_EQ(d.replica, owner[i]) << "prompt " << i;
    EXPECT_EQ(d.matched_tokens, 80);
  }
  // The same prompt again matches in full.
  EXPECT_EQ(r.Route(prompts[5], loads).matched_tokens, 100);
  EXPECT_EQ(r.Route(prompts[5], loads).replica, owner[5]);
}

TEST(DpRouter, CacheAwareFallsBackToLeastLoad) {
  std::mt19937 rng(8);
  DpRouter r(2, {.method = LoadBalanceMethod::kCacheAware});
  const std::vector<int32_t> a = RandomPrompt(rng, 100, 50000);
  r.Record(a, 0);
  // A short match (40 of 100 tokens, below the 0.5 threshold) goes to the least loaded.
  std::vector<int32_t> p(a.begin(), a.begin() + 40);
  std::vector<int32_t> tail = RandomPrompt(rng, 60, 50000);
  p.insert(p.end(), tail.begin(), tail.end());
  EXPECT_EQ(r.Route(p, std::vector<int64_t>{1, 0}).replica, 1);
  // Exactly at the threshold (50 of 100) the cache wins.
  std::vector<int32_t> q(a.begin(), a.begin() + 50);
  q.insert(q.end(), tail.begin(), tail.begin() + 50);
  EXPECT_EQ(r.Route(q, std::vector<int64_t>{1, 0}).replica, 0);
  // A full match on a replica more than 32 requests busier than the other: load wins.
  EXPECT_EQ(r.Route(a, std::vector<int64_t>{33, 0}).replica, 1);
  EXPECT_EQ(r.Route(a, std::vector<int64_t>{32, 0}).replica, 0);
  // After Clear nothing matches.
  r.Clear();
  EXPECT_EQ(r.Route(a, std::vector<int64_t>{1, 0}).replica, 1);
}

// Without eviction the tree's match equals the brute-force longest common prefix with the
// prompts each replica was sent. A small vocabulary and shared stems make many splits.
TEST(PrefixTree, MatchEqualsBruteForce) {
  for (int n : {1, 2, 3, 5}) {
    std::mt19937 rng(100 + n);
    PrefixTree tree(n, int64_t{1} << 40);
    std::vector<std::vector<std::vector<int32_t>>> sent(n);
    std::vector<std::vector<int32_t>> stems;
    for (int i = 0; i < 6; ++i) stems.push_back(RandomPrompt(rng, 1 + rng() % 30, 4));
    auto make = [&] {
      std::vector<int32_t> p = stems[rng() % stems.size()];
      p.resize(rng() % (p.size() + 1));
      std::vector<int32_t> tail = RandomPrompt(rng, rng() % 20, 4);
      p.insert(p.end(), tail.begin(), tail.end());
      return p;
    };
    for (int it = 0; it < 400; ++it) {
      const std::vector<int32_t> q = make();
      const std::vector<int64_t> got = tree.Match(q);
      for (int r = 0; r < n; ++r) {
        int64_t best = 0;
        for (const auto& s : sent[r]) {
          int64_t k = 0;
          while (k < static_cast<int64_t>(std::min(s.size(), q.size())) && s[k] == q[k]) ++k;
          best = std::max(best, k);
        }
        ASSERT_EQ(got[r], best) << "n=" << n << " it=" << it << " replica " << r;
      }
      const int to = static_cast<int>(rng() % n);
      tree.Insert(q, to);
      sent[to].push_back(q);
    }
  }
}

TEST(PrefixTree, EvictionKeepsEachReplicaUnderItsCapAndKeepsRecentPrompts) {
  std::mt19937 rng(9);
  const int64_t cap = 1000;
  PrefixTree tree(2, cap);
  std::vector<int32_t> last;
  for (int i = 0; i < 200; ++i) {
    last = RandomPrompt(rng, 50, 1000);
    tree.Insert(last, i % 2);
    ASSERT_LE(tree.tokens(i % 2), cap);
  }
  EXPECT_GT(tree.tokens(0), cap / 2);
  EXPECT_EQ(tree.Match(last)[1], 50);  // the newest prompt survives
}

}  // namespace
}  // namespace mx
