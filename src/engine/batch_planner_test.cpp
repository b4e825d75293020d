// The batch planner's prefill budget while requests decode (SchedulerConfig::max_decode_gap_s).
#include "engine/batch_planner.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <numeric>
#include <vector>

#include "engine/engine_test_util.h"

namespace mx::batch_planner_test {
namespace {

using ReqPtr = std::unique_ptr<ScheduledRequest>;

ReqPtr Request(RequestId id, int n_tokens) {
  auto r = std::make_unique<ScheduledRequest>(SamplingParams{});
  r->id = id;
  r->tokens.resize(n_tokens);
  std::iota(r->tokens.begin(), r->tokens.end(), static_cast<int32_t>(1000 * id));
  r->n_prompt = n_tokens;
  r->req.max_tokens = 4;
  return r;
}

struct Fixture {
  SchedulerConfig cfg;
  std::unique_ptr<CacheManager> cache;
  std::deque<ReqPtr> waiting;
  std::vector<ReqPtr> running;
  EngineStats stats;
  StepCosts costs;
  std::unique_ptr<BatchPlanner> planner;

  explicit Fixture(double gap_s) {
    cfg.page_size = 4;
    cfg.n_pages = 1024;
    cfg.kv_dtype = KvCacheDtype::kF32;
    cfg.chunked_prefill_size = 512;
    cfg.max_decode_gap_s = gap_s;
    cfg.min_prefill_chunk = 16;
    cache = std::make_unique<CacheManager>(TinyTestConfig(), cfg);
    planner = std::make_unique<BatchPlanner>(cfg, *cache, waiting, running, stats, costs);
  }

  // A running request whose prompt is computed and which has one output token to feed.
  void AddDecoding(RequestId id) {
    ReqPtr r = Request(id, 9);
    r->n_prompt = 8;
    const RadixCache::MatchResult m = cache->LockPrefix({});
    cache->Admit(*r, m);
    ASSERT_TRUE(cache->CanGrow(r->seq(), 8));
    cache->Grow(r->seq(), 8);
    r->kv_len = 8;
    running.push_back(std::move(r));
  }
};

int64_t ChunkOf(const ScheduledBatch& b, RequestId id) {
  for (auto [r, n] : b) {
    if (r->id == id) return n;
  }
  return 0;
}

TEST(BatchPlanner, WithoutDecodeRowsAPromptGetsTheWholeChunk) {
  Fixture f(0.05);
  f.costs.Observe(2, 0, 0.0, 0.010);
  f.costs.Observe(2, 100, 50.0, 0.110);  // 1 ms per token
  f.waiting.push_back(Request(1, 2000));
  const ScheduledBatch b = f.planner->Plan();
  EXPECT_EQ(ChunkOf(b, 1), 512);
  EXPECT_EQ(f.planner->last_shape().decode_rows, 0);
  EXPECT_EQ(f.planner->last_shape().prefill_tokens, 512);
}

TEST(BatchPlanner, DecodeRowsCutThePromptChunkToTheGap) {
  Fixture f(0.05);
  f.costs.Observe(2, 0, 0.0, 0.010);
  f.costs.Observe(2, 100, 50.0, 0.110);  // 1 ms per token: (50 - 10) ms leaves 40 tokens
  f.AddDecoding(1);
  f.AddDecoding(2);
  f.waiting.push_back(Request(3, 2000));
  const ScheduledBatch b = f.planner->Plan();
  EXPECT_EQ(ChunkOf(b, 1), 1);
  EXPECT_EQ(ChunkOf(b, 2), 1);
  EXPECT_EQ(ChunkOf(b, 3), 40);
  EXPECT_EQ(f.planner->last_shape().decode_rows, 2);
  EXPECT_EQ(f.planner->last_shape().prefill_tokens, 40);
}

TEST(BatchPlanner, UnknownCostsGiveTheMinimumChunkAndAZeroGapTurnsTheLimitOff) {
  Fixture cold(0.05);
  cold.AddDecoding(1);
  cold.waiting.push_back(Request(2, 2000));
  EXPECT_EQ(ChunkOf(cold.planner->Plan(), 2), 16);
  EXPECT_EQ(cold.planner->last_shape().prefill_context, 7.5);  // positions 0..15

  Fixture off(0.0);
  off.costs.Observe(2, 0, 0.0, 0.010);
  off.costs.Observe(2, 100, 50.0, 0.110);
  off.AddDecoding(1);
  off.waiting.push_back(Request(2, 2000));
  EXPECT_EQ(ChunkOf(off.planner->Plan(), 2), 512);
}

// Two prompts mid-prefill at different contexts: each chunk is priced at its own context, and
// the second gets what the first leaves of the gap.
TEST(BatchPlanner, EachChunkIsPricedAtItsOwnContext) {
  Fixture f(0.0515);
  f.cfg.min_prefill_chunk = 4;  // below every chunk here
  f.costs.Observe(2, 0, 0.0, 0.010);
  f.costs.Observe(2, 100, 50.0, 0.110);   // 1 ms per token below 512
  f.costs.Observe(2, 10, 1500.0, 0.040);  // 3 ms per token at 1k–2k
  f.AddDecoding(1);
  f.AddDecoding(2);
  f.waiting.push_back(Request(3, 1500));  // both fit the 4,096-token pool's reservations
  f.waiting.push_back(Request(4, 1500));
  ScheduledBatch b = f.planner->Plan();
  EXPECT_EQ(ChunkOf(b, 3), 41);  // (51.5 - 10) ms at 1 ms a token
  EXPECT_EQ(ChunkOf(b, 4), 0);   // 0.5 ms left: no token fits
  // Prompt 3 has reached position 1,200 (as if its chunks ran); prompt 4 is at 0.
  ASSERT_EQ(f.running[2]->id, 3);
  f.running[2]->kv_len = 1200;
  b = f.planner->Plan();
  EXPECT_EQ(ChunkOf(b, 3), 13);  // 41.5 ms at 3 ms a token: 13 (39 ms) ...
  EXPECT_EQ(ChunkOf(b, 4), 2);   // ... and 2.5 ms left for prompt 4 at 1 ms a token
  EXPECT_NEAR(f.planner->last_shape().prefill_context, (13 * 1206.0 + 2 * 0.5) / 15, 1e-9);
}

// The minimum chunk lets a prompt progress when the decode rows alone fill the gap, once a step.
TEST(BatchPlanner, TheMinimumChunkIsTheFirstChunkOnly) {
  Fixture f(0.05);
  f.costs.Observe(2, 0, 0.0, 0.060);  // the decode rows alone exceed the 50 ms gap
  f.costs.Observe(2, 100, 50.0, 0.160);
  f.AddDecoding(1);
  f.AddDecoding(2);
  f.waiting.push_back(Request(3, 2000));
  f.waiting.push_back(Request(4, 2000));
  const ScheduledBatch b = f.planner->Plan();
  EXPECT_EQ(ChunkOf(b, 3), 16);
  EXPECT_EQ(ChunkOf(b, 4), 0);
  EXPECT_EQ(f.running.size(), 3U);  // prompt 4 waits: no time was left to admit it
}

}  // namespace
}  // namespace mx::batch_planner_test
