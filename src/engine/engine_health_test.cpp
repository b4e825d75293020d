// Engine failure on FailingRunner (engine_test_util.h): a runner error that says the runner is
// broken (Unavailable, Aborted: model_runner.h) fails the engine for good: every running and
// queued request ends with it in that step, no forward runs after it, Submit is refused and
// Health() says why; requests racing the failure all end too. Any other error code fails only
// its batch.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "engine/engine_factory.h"
#include "engine/engine_test_util.h"

namespace mx {
namespace {

EngineOptions SmallOptions() {
  EngineOptions o;
  o.page_size = 4;
  o.max_total_tokens = 1024;
  o.max_running_requests = 2;  // the rest of a burst waits in the queue
  o.chunked_prefill_size = 64;
  o.kv_cache_dtype = KvCacheDtype::kF32;
  return o;
}

struct Rig {
  std::unique_ptr<Engine> engine;
  FailingRunner* runner = nullptr;  // owned by the engine
};

Rig MakeRig(int64_t fail_at, Status error, int64_t n_failures) {
  Rig g;
  auto runner = std::make_unique<FailingRunner>(TinyTestConfig(), fail_at, error, n_failures);
  g.runner = runner.get();
  auto e = CreateEngineWithRunner(SmallOptions(), std::move(runner), std::nullopt, {});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (e.ok()) g.engine = std::move(*e);
  return g;
}

std::vector<std::vector<int32_t>> RandomPrompts(uint32_t seed, int n, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> out(n);
  for (auto& p : out) {
    p.resize(3 + rng() % 10);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % vocab);
  }
  return out;
}

class BrokenRunner : public ::testing::TestWithParam<StatusCode> {};

// The runner fails once (forward 2), then would work again: the engine must not use it again.
TEST_P(BrokenRunner, FailsEveryRequestRefusesNewOnesAndReportsHealth) {
  const Status broken(GetParam(), "tp rank 1 died");
  Rig g = MakeRig(/*fail_at=*/2, broken, /*n_failures=*/1);
  ASSERT_NE(g.engine, nullptr);
  EXPECT_TRUE(g.engine->Health().ok());
  const int64_t vocab = g.engine->vocab_size();
  const auto prompts = RandomPrompts(7, 6, vocab);
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {  // forward 0 is held: one or two run, the rest queue
    auto s = g.engine->Submit(Greedy(p, 40));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(std::move(*s));
  }
  g.runner->Open();
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamResult out = Drain(*streams[i], std::chrono::seconds(30));
    ASSERT_FALSE(out.timed_out) << "request " << i << " hangs";
    EXPECT_EQ(out.last.finish, FinishReason::kAbort) << i;
    EXPECT_EQ(out.last.error.code(), GetParam()) << i << ": " << out.last.error.ToString();
    EXPECT_EQ(out.last.error.message(), "tp rank 1 died") << i;
    EXPECT_LT(out.tokens.size(), 40u) << i;
  }
  EXPECT_EQ(g.runner->forwards.load(), 3) << "no forward after the failure";
  EXPECT_EQ(g.runner->failed.load(), 1);

  // Health says so as soon as a stream has seen the error.
  const Status h = g.engine->Health();
  EXPECT_EQ(h.code(), StatusCode::kUnavailable);
  EXPECT_EQ(h.message(), "engine failed: tp rank 1 died");
  auto later = g.engine->Submit(Greedy(prompts[0], 4));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(later.status().message(), "engine failed: tp rank 1 died");
  EXPECT_EQ(g.runner->forwards.load(), 3);
}

INSTANTIATE_TEST_SUITE_P(Codes, BrokenRunner,
                         ::testing::Values(StatusCode::kUnavailable, StatusCode::kAborted),
                         [](const auto& info) { return std::string(StatusCodeName(info.param)); });

// Requests submitted all the while the engine fails: every accepted one ends (with
// the error or, before the failure, normally), and Submit turns Unavailable.
TEST(EngineHealth, RequestsRacingTheFailureAllEnd) {
  Rig g = MakeRig(/*fail_at=*/200, Status(StatusCode::kUnavailable, "peer gone"), -1);
  ASSERT_NE(g.engine, nullptr);
  g.runner->Open();
  const auto prompts = RandomPrompts(3, 64, g.engine->vocab_size());
  std::vector<std::unique_ptr<RequestStream>> streams;
  Status refused;
  for (int i = 0; i < 100000; ++i) {
    auto s = g.engine->Submit(Greedy(prompts[i % prompts.size()], 8));
    if (!s.ok() && s.status().code() == StatusCode::kResourceExhausted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a slow host: let it catch up
      continue;
    }
    if (!s.ok()) {
      refused = s.status();
      break;
    }
    streams.push_back(std::move(*s));
    if (i % 8 == 7) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_EQ(refused.message(), "engine failed: peer gone");
  int64_t failed = 0;
  for (auto& s : streams) {
    StreamResult out = Drain(*s, std::chrono::seconds(30));
    ASSERT_FALSE(out.timed_out);
    if (!out.last.error.ok()) {
      EXPECT_EQ(out.last.error.message(), "peer gone");
      ++failed;
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_EQ(g.runner->failed.load(), 1) << "the runner is not called after it broke";
}

// An error of another code is the batch's own: those requests end with it; the queued ones and
// later ones are served with the right tokens, and the engine stays healthy.
TEST(EngineHealth, PerBatchErrorFailsOnlyThatBatch) {
  Rig g = MakeRig(/*fail_at=*/0, Internal("bad batch"), /*n_failures=*/1);
  ASSERT_NE(g.engine, nullptr);
  const int64_t vocab = g.engine->vocab_size();
  const auto prompts = RandomPrompts(11, 6, vocab);
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {
    auto s = g.engine->Submit(Greedy(p, 12));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(std::move(*s));
  }
  g.runner->Open();
  int failed = 0, served = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamResult out = Drain(*streams[i], std::chrono::seconds(30));
    ASSERT_FALSE(out.timed_out) << i;
    if (!out.last.error.ok()) {
      EXPECT_EQ(out.last.error.code(), StatusCode::kInternal);
      EXPECT_EQ(out.last.error.message(), "bad batch");
      ++failed;
    } else {
      EXPECT_EQ(out.tokens, FakeGreedy(prompts[i], 12, vocab)) << i;
      ++served;
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_LE(failed, 2) << "only the first batch (max_running_requests = 2)";
  EXPECT_GE(served, 4);
  EXPECT_TRUE(g.engine->Health().ok()) << g.engine->Health().ToString();
  auto more = g.engine->Submit(Greedy(prompts[0], 12));
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  StreamResult out = Drain(**more, std::chrono::seconds(30));
  ASSERT_FALSE(out.timed_out);
  EXPECT_TRUE(out.last.error.ok()) << out.last.error.ToString();
  EXPECT_EQ(out.tokens, FakeGreedy(prompts[0], 12, vocab));
}

}  // namespace
}  // namespace mx
