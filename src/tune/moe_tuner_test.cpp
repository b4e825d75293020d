// The MoE tuner: which candidates exist per bucket, a full tune on a tiny shape (every
// candidate passes the reference check, the table is well formed), the representative subset
// and input errors.
#include "tune/moe_tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

namespace mx::tune {
namespace {

const MoeShape kTiny{64, 32, 6, 2, 1};

TEST(MoeCandidates, DefaultFirstNoDuplicatesAndOnlyChoicesThatMatter) {
  for (int64_t T : {1, 2, 65, 512}) {
    const auto c = EnumerateMoeCandidates(kTiny, "bf16", KernelLevel::kAvx2, T, 2);
    ASSERT_FALSE(c.empty());
    EXPECT_EQ(c[0], DefaultMoeConfig());
    for (size_t i = 0; i < c.size(); ++i) {
      for (size_t j = i + 1; j < c.size(); ++j) EXPECT_FALSE(c[i] == c[j]) << i << " " << j;
      EXPECT_TRUE(c[i].split == MoeSplit::kColumns || !c[i].fuse_gate_up);
      if (T == 1) {
        EXPECT_EQ(c[i].tiling, GemmTiling{});  // one row: nothing to tile
      }
      if (T <= 64) {
        EXPECT_EQ(c[i].token_tile, 0);
      }
    }
  }
  // 1 token: columns, columns fused, batched, experts.
  EXPECT_EQ(EnumerateMoeCandidates(kTiny, "bf16", KernelLevel::kAvx2, 1, 2).size(), 4u);
  // 512 tokens: 4 splits × 4 row tiles × 2 column blocks × 2 token tiles.
  EXPECT_EQ(EnumerateMoeCandidates(kTiny, "mxfp4", KernelLevel::kAvx512, 512, 2).size(), 64u);
  // One thread: no whole-expert split; the ref level: no tiling.
  for (const auto& c : EnumerateMoeCandidates(kTiny, "bf16", KernelLevel::kRef, 512, 1)) {
    EXPECT_NE(c.split, MoeSplit::kExperts);
    EXPECT_EQ(c.tiling, GemmTiling{});
  }
}

TEST(MoeTuner, TunesATinyShapeForEveryDtype) {
  ThreadPool pool(2);
  for (const std::string dtype : {"bf16", "mxfp4", "fp8"}) {
    MoeTuneOptions o;
    o.shape = kTiny;
    o.dtype = dtype;
    o.tokens = {1, 3, 70};
    o.repeats = 2;
    o.command = "test";
    int64_t calls = 0;
    double last = 0;
    auto t = TuneMoe(o, SelectKernels(), pool, [&](const MoeTuneProgress& p) {
      ++calls;
      EXPECT_GE(p.fraction_done, last);
      last = p.fraction_done;
    });
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dtype, dtype);
    EXPECT_EQ(t->isa, KernelLevelName(SelectKernels().level));
    EXPECT_EQ(t->experts_allocated, kTiny.n_experts);
    ASSERT_EQ(t->buckets.size(), 3u);
    int64_t total = 0;
    for (size_t i = 0; i < 3; ++i) {
      const MoeTuneBucket& b = t->buckets[i];
      EXPECT_EQ(b.tokens, o.tokens[i]);
      const auto cands =
          EnumerateMoeCandidates(kTiny, dtype, SelectKernels().level, b.tokens, pool.size());
      EXPECT_EQ(b.candidates, static_cast<int64_t>(cands.size()));
      EXPECT_NE(std::find(cands.begin(), cands.end(), b.best), cands.end());
      EXPECT_GT(b.best_us, 0);
      total += b.candidates;
    }
    EXPECT_EQ(calls, total);
    EXPECT_NEAR(last, 1.0, 1e-9);
    // What the tuner writes, the engine reads.
    auto back = ParseMoeTuneTable(SerializeMoeTuneTable(*t), "t.json");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->buckets[2].best, t->buckets[2].best);
  }
}

// The choice itself, against a cost model with a known answer: each candidate costs a fixed
// amount per bucket (a different winner per bucket, never the default), with a slow outlier
// run that only the median ignores. The table must name exactly the cheapest candidate, its
// median cost and the default's.
TEST(MoeTuner, PicksTheCheapestCandidateOfAKnownCostModel) {
  ThreadPool pool(2);
  MoeTuneOptions o;
  o.shape = kTiny;
  o.dtype = "bf16";
  o.tokens = {1, 3, 70};
  o.repeats = 3;
  std::map<int64_t, std::vector<MoeKernelConfig>> cands;
  for (int64_t T : o.tokens) {
    cands[T] = EnumerateMoeCandidates(kTiny, "bf16", SelectKernels().level, T, pool.size());
  }
  // Cost of candidate i at bucket T: 100 + 7 * ((i + T) mod n), except the winner, which is
  // the candidate at index (T mod (n - 1)) + 1, at 50. The winner is never the default (0).
  auto cost = [&](int64_t T, size_t i) {
    const size_t n = cands[T].size();
    if (i == static_cast<size_t>(T) % (n - 1) + 1) return 50.0;
    return 100.0 + 7.0 * static_cast<double>((i + T) % n);
  };
  std::map<std::pair<int64_t, size_t>, int> runs;
  o.time_us = [&](const MoeKernelConfig& c, int64_t T, const std::function<void()>& run) {
    run();
    const auto& cs = cands.at(T);
    const size_t i = std::find(cs.begin(), cs.end(), c) - cs.begin();
    EXPECT_LT(i, cs.size());
    // The first timed run of each candidate is 100x slower: a median of 3 ignores it.
    return (runs[{T, i}]++ == 0 ? 100.0 : 1.0) * cost(T, i);
  };
  auto t = TuneMoe(o, SelectKernels(), pool, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->buckets.size(), 3u);
  for (const MoeTuneBucket& b : t->buckets) {
    const auto& cs = cands[b.tokens];
    ASSERT_GE(cs.size(), 2u);
    const size_t want = static_cast<size_t>(b.tokens) % (cs.size() - 1) + 1;
    EXPECT_EQ(b.best, cs[want]) << b.tokens;
    EXPECT_EQ(b.best_us, 50.0) << b.tokens;
    EXPECT_EQ(b.default_us, cost(b.tokens, 0)) << b.tokens;
    for (size_t i = 0; i < cs.size(); ++i) EXPECT_EQ((runs[{b.tokens, i}]), o.repeats);
  }
}

// One bucket of `tokens` of a bf16 shape, timed once per candidate.
MoeTuneOptions SmallBf16(const MoeShape& shape, int64_t tokens) {
  MoeTuneOptions o;
  o.shape = shape;
  o.dtype = "bf16";
  o.tokens = {tokens};
  o.repeats = 1;
  return o;
}

// With the caches flushed before each timed run (what `mxserve tune moe` does) the tuner still
// checks and times every candidate and keeps the fastest.
TEST(MoeTuner, FlushedCachesStillTimeEveryCandidate) {
  ThreadPool pool(2);
  MoeTuneOptions o = SmallBf16({64, 32, 4, 2, 1}, 1);
  o.warmup = 0;
  o.flush_caches = true;
  int64_t timed = 0;
  auto t = TuneMoe(o, SelectKernels(), pool, [&](const MoeTuneProgress& p) {
    ++timed;
    EXPECT_GT(p.median_us, 0.0);
  });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->buckets.size(), 1u);
  EXPECT_EQ(timed, t->buckets[0].candidates);
  EXPECT_LE(t->buckets[0].best_us, t->buckets[0].default_us);
}

TEST(MoeTuner, LargeShapesTuneOnASubsetOfExperts) {
  ThreadPool pool(1);
  MoeTuneOptions o = SmallBf16({64, 32, 40, 2, 1}, 4);
  const int64_t per = 3 * 64 * 32 * 2;  // bytes of one bf16 expert
  o.max_expert_bytes = 10 * per;        // 1 shared + 9 routed
  auto t = TuneMoe(o, SelectKernels(), pool, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->experts_allocated, 9);
  o.max_expert_bytes = 3 * per;  // 2 routed < k + 1
  auto too_small = TuneMoe(o, SelectKernels(), pool, nullptr);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("the subset needs at least 3"), std::string::npos)
      << too_small.status().message();
}

TEST(MoeTuner, RejectsBadOptions) {
  ThreadPool pool(1);
  MoeTuneOptions o;
  o.shape = kTiny;
  o.dtype = "int4";
  o.tokens = {1};
  EXPECT_NE(TuneMoe(o, SelectKernels(), pool, nullptr).status().message().find("--dtype int4"),
            std::string::npos);
  o.dtype = "bf16";
  o.tokens = {4, 2};
  EXPECT_NE(TuneMoe(o, SelectKernels(), pool, nullptr).status().message().find("ascending"),
            std::string::npos);
  o.tokens = {1};
  o.dtype = "mxfp4";
  o.shape.moe_inter = 40;
  EXPECT_NE(TuneMoe(o, SelectKernels(), pool, nullptr).status().message().find("divisible by 32"),
            std::string::npos);
}

}  // namespace
}  // namespace mx::tune
