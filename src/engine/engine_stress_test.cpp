// The scheduler under load, on FakeRunner (engine_test_util.h): 10,000 random requests with
// shared prefixes, random lengths and random aborts through a tiny KV pool (retractions,
// evictions, chunked prefill). Every request must end (finished or aborted) with the tokens
// the fake model defines, no KV row may be read back wrong, and after a flush no page may be
// left in use.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine_factory.h"
#include "engine/engine_test_util.h"

namespace mx {
namespace {

TEST(EngineStress, TenThousandRandomRequestsTinyPool) {
  const ModelConfig cfg = TinyTestConfig();
  auto runner = std::make_unique<FakeRunner>(cfg);
  FakeRunner* fake = runner.get();
  EngineOptions o;
  o.page_size = 4;
  o.max_total_tokens = 256;
  o.max_running_requests = 16;
  o.max_queued_requests = 20000;
  o.chunked_prefill_size = 24;
  o.kv_cache_dtype = KvCacheDtype::kF32;
  o.schedule_policy = SchedulePolicy::kLpm;
  auto e = CreateEngineWithRunner(o, std::move(runner), std::nullopt, {300, 307, 309});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  Engine& engine = **e;

  std::mt19937 rng(12345);
  std::vector<std::vector<int32_t>> bases(8);
  for (auto& b : bases) {
    for (int i = 0; i < 80; ++i) b.push_back(static_cast<int32_t>(rng() % 300));
  }
  constexpr int kN = 10000;
  struct Sub {
    std::vector<int32_t> prompt;
    int32_t max_tokens;
    bool ignore_eos;
    std::unique_ptr<RequestStream> stream;
  };
  std::vector<Sub> subs;
  subs.reserve(kN);
  for (int i = 0; i < kN; ++i) {
    Sub s;
    const auto& b = bases[rng() % bases.size()];
    s.prompt.assign(b.begin(), b.begin() + 1 + rng() % 60);
    for (int k = rng() % 12; k > 0; --k) s.prompt.push_back(static_cast<int32_t>(rng() % 300));
    s.max_tokens = 1 + static_cast<int32_t>(rng() % 40);
    s.ignore_eos = rng() % 4 != 0;
    GenerationRequest r;
    r.prompt = s.prompt;
    r.max_tokens = s.max_tokens;
    r.ignore_eos = s.ignore_eos;
    r.sampling.temperature = 0;
    auto st = engine.Submit(std::move(r));
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    s.stream = std::move(*st);
    subs.push_back(std::move(s));
    if (rng() % 10 == 0) engine.Abort(subs[rng() % subs.size()].stream->id());
    if (rng() % 500 == 0) engine.FlushCache();
  }
  int finished = 0, aborted = 0;
  for (auto& s : subs) {
    StreamResult r = Drain(*s.stream, std::chrono::seconds(120));
    ASSERT_FALSE(r.timed_out) << "request " << s.stream->id() << " never ended (deadlock?)";
    ASSERT_TRUE(r.last.error.ok()) << r.last.error.ToString();
    const std::vector<int32_t> want = FakeGreedy(s.prompt, s.max_tokens, cfg.vocab_size);
    ASSERT_LE(r.tokens.size(), want.size());
    ASSERT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), want.begin()))
        << "request " << s.stream->id();
    if (r.last.finish == FinishReason::kAbort) {
      ++aborted;
      continue;
    }
    ++finished;
    if (r.last.finish == FinishReason::kLength) {
      EXPECT_EQ(static_cast<int32_t>(r.tokens.size()), s.max_tokens);
    } else {
      ASSERT_EQ(r.last.finish, FinishReason::kStop);
      EXPECT_FALSE(s.ignore_eos);
      EXPECT_TRUE(r.last.matched_stop_token.has_value());
    }
    EXPECT_EQ(r.last.completion_tokens, static_cast<int32_t>(r.tokens.size()));
  }
  EXPECT_EQ(finished + aborted, kN);
  EXPECT_GT(aborted, 0);
  EXPECT_EQ(fake->bad_rows.load(), 0);
  engine.FlushCache();
  WaitFor(
      [&] {
        const EngineStats s = engine.Stats();
        return s.gauges.kv_pages_used == 0 && s.gauges.running == 0 && s.gauges.queued == 0;
      },
      kWaitTimeout, "an idle engine with every page free");
  const EngineStats st = engine.Stats();
  EXPECT_EQ(st.gauges.kv_pages_used, 0) << "leaked pages";
  EXPECT_EQ(st.counters.requests_finished, finished);
  EXPECT_EQ(st.counters.requests_aborted, aborted);
  EXPECT_GT(st.counters.retractions, 0);
  EXPECT_GT(st.counters.radix_hit_tokens, 0);
  std::printf("stress: %d finished, %d aborted, %lld retractions, hit rate %.2f, %lld steps\n",
              finished, aborted, static_cast<long long>(st.counters.retractions),
              static_cast<double>(st.counters.radix_hit_tokens) /
                  static_cast<double>(std::max<int64_t>(1, st.counters.prompt_tokens_total)),
              static_cast<long long>(fake->calls.load()));
}

}  // namespace
}  // namespace mx
