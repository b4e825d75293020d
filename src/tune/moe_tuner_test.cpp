// The MoE tuner: which candidates exist per bucket, a full tune on a tiny shape (every
// candidate passes the reference check, the table is well formed), the representative subset
// and input errors.
#include "tune/moe_tuner.h"

#include <gtest/gtest.h>

#include <algorithm>

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

TEST(MoeTuner, TunesATinyShapeForBothDtypes) {
  ThreadPool pool(2);
  for (const std::string dtype : {"bf16", "mxfp4"}) {
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
      EXPECT_LE(b.best_us, b.default_us);
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

TEST(MoeTuner, LargeShapesTuneOnASubsetOfExperts) {
  ThreadPool pool(1);
  MoeTuneOptions o;
  o.shape = {64, 32, 40, 2, 1};
  o.dtype = "bf16";
  o.tokens = {4};
  o.repeats = 1;
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
  o.dtype = "fp8";
  o.tokens = {1};
  EXPECT_NE(TuneMoe(o, SelectKernels(), pool, nullptr).status().message().find("--dtype fp8"),
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
