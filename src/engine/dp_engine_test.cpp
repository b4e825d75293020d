// The data-parallel group over scripted fake replicas (routing order, least load, cache-aware
// stickiness and spread, abort and streams reaching the owning replica although replica-local
// ids collide, full-queue fallback, summed stats, failed replicas out of rotation), over
// engines whose runner breaks, and over real replicas of the tiny test checkpoint (greedy
// tokens equal to one engine; --dp errors).
#include "engine/dp_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>

#include "engine/engine_factory.h"
#include "engine/engine_test_util.h"

namespace mx {
namespace {

// A replica that records what it is sent. Its streams end when aborted or, when `finish` is
// set, with one chunk carrying the token `tag`; otherwise they stay running.
class FakeReplica final : public Engine {
 public:
  struct Log {
    std::mutex mu;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<RequestId> local_ids;
    std::vector<RequestId> aborted;
    std::set<RequestId> finished;  // aborted or done
    int64_t submits = 0;           // Submit calls, refused ones too
    Status health;                 // non-ok: failed (Health, and Submit refuses with it)
    bool hide_health = false;      // Health() says ok even so (it failed after being asked)
  };

  FakeReplica(int32_t tag, bool finish, int64_t max_active = 1 << 20)
      : tag_(tag), finish_(finish), max_active_(max_active), log_(std::make_shared<Log>()) {}
  std::shared_ptr<Log> log() const { return log_; }

  Result<std::unique_ptr<RequestStream>> Submit(GenerationRequest r) override {
    std::lock_guard<std::mutex> l(log_->mu);
    ++log_->submits;
    if (!log_->health.ok()) return log_->health;
    if (static_cast<int64_t>(log_->prompts.size() - log_->finished.size()) >= max_active_) {
      return ResourceExhausted("fake replica {} is full", tag_);
    }
    const RequestId id = next_++;  // 1, 2, ... on every replica: ids collide across replicas
    log_->prompts.push_back(r.prompt);
    log_->local_ids.push_back(id);
    return std::unique_ptr<RequestStream>(std::make_unique<Stream>(this, id));
  }
  void Abort(RequestId id) override {
    std::lock_guard<std::mutex> l(log_->mu);
    log_->aborted.push_back(id);
    log_->finished.insert(id);
  }
  EngineStats Stats() const override {
    std::lock_guard<std::mutex> l(log_->mu);
    EngineStats s;
    s.gauges.running = static_cast<int64_t>(log_->prompts.size() - log_->finished.size());
    s.counters.prompt_tokens_total = 0;
    for (const auto& p : log_->prompts)
      s.counters.prompt_tokens_total += static_cast<int64_t>(p.size());
    s.gauges.kv_pages_total = 100 + tag_;
    s.gauges.kv_pages_used = tag_;
    s.gauges.kv_page_size = 16;
    s.spec.verify_steps = tag_ + 1;
    s.spec.accept_length_mean = 1.0 + tag_;
    s.spec.proposed_at = {tag_ + 1, 1};
    return s;
  }
  void FlushCache() override {}
  void Shutdown(std::chrono::milliseconds) override {}
  Status Health() const override {
    std::lock_guard<std::mutex> l(log_->mu);
    return log_->hide_health ? Status::Ok() : log_->health;
  }
  int64_t context_window() const override { return 4096; }
  int64_t vocab_size() const override { return 1000; }

 private:
  class Stream final : public RequestStream {
   public:
    Stream(FakeReplica* e, RequestId id) : e_(e), id_(id) {}
    RequestId id() const override { return id_; }
    std::optional<GenerationChunk> Next(std::chrono::milliseconds timeout) override {
      std::unique_lock<std::mutex> l(e_->log_->mu);
      GenerationChunk c;
      if (std::count(e_->log_->aborted.begin(), e_->log_->aborted.end(), id_) > 0) {
        c.finish = FinishReason::kAbort;
        return c;
      }
      if (e_->finish_) {
        e_->log_->finished.insert(id_);
        c.tokens = {e_->tag_};
        c.finish = FinishReason::kLength;
        return c;
      }
      l.unlock();
      std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(1)));
      return std::nullopt;
    }

   private:
    FakeReplica* e_;
    RequestId id_;
  };

  int32_t tag_;
  bool finish_;
  int64_t max_active_;
  std::shared_ptr<Log> log_;
  RequestId next_ = 1;
};

struct Group {
  std::unique_ptr<Engine> dp;
  std::vector<std::shared_ptr<FakeReplica::Log>> logs;
};

Group MakeGroup(int n, LoadBalanceMethod method, bool finish,
                std::vector<int64_t> max_active = {}) {
  Group g;
  std::vector<std::unique_ptr<Engine>> replicas;
  for (int r = 0; r < n; ++r) {
    auto e =
        std::make_unique<FakeReplica>(r, finish, max_active.empty() ? (1 << 20) : max_active[r]);
    g.logs.push_back(e->log());
    replicas.push_back(std::move(e));
  }
  g.dp = MakeDpEngine(std::move(replicas), {.method = method});
  return g;
}

// Which replica was sent `prompt` (-1: none, -2: several).
int OwnerOf(const Group& g, const std::vector<int32_t>& prompt) {
  int owner = -1;
  for (size_t r = 0; r < g.logs.size(); ++r) {
    std::lock_guard<std::mutex> l(g.logs[r]->mu);
    for (const auto& p : g.logs[r]->prompts) {
      if (p == prompt) owner = owner == -1 ? static_cast<int>(r) : -2;
    }
  }
  return owner;
}

GenerationRequest Req(std::vector<int32_t> prompt) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  return r;
}

std::unique_ptr<RequestStream> MustSubmit(Engine& e, GenerationRequest r) {
  auto s = e.Submit(std::move(r));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::vector<int32_t> RandomPrompt(std::mt19937& rng, size_t n) {
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % 1000);
  return p;
}

TEST(DpEngine, RoundRobinSendsInTurnAndStreamsComeFromTheOwner) {
  Group g = MakeGroup(3, LoadBalanceMethod::kRoundRobin, /*finish=*/true);
  std::set<RequestId> ids;
  for (int i = 0; i < 7; ++i) {
    auto s = g.dp->Submit(Req({i + 1, 2, 3}));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(ids.insert((*s)->id()).second) << "group ids must be unique";
    StreamResult out = Drain(**s);
    ASSERT_FALSE(out.timed_out);
    EXPECT_EQ(out.tokens, (std::vector<int32_t>{i % 3})) << "request " << i;
    EXPECT_EQ(OwnerOf(g, {i + 1, 2, 3}), i % 3);
  }
  EngineStats s = g.dp->Stats();
  ASSERT_EQ(s.dp_replicas.size(), 3u);
  EXPECT_EQ(s.dp_replicas[0].requests_routed, 3);
  EXPECT_EQ(s.dp_replicas[1].requests_routed, 2);
  EXPECT_EQ(s.dp_replicas[2].requests_routed, 2);
}

TEST(DpEngine, LeastLoadPicksTheReplicaWithFewestUnfinished) {
  Group g = MakeGroup(3, LoadBalanceMethod::kLeastLoad, /*finish=*/false);
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (int i = 0; i < 6; ++i) streams.push_back(MustSubmit(*g.dp, Req({i + 1})));
  // Two each.
  for (int r = 0; r < 3; ++r) EXPECT_EQ(g.dp->Stats().dp_replicas[r].running, 2);
  // End both of one replica's requests (abort, then read the end): it is now the least loaded.
  const int freed = OwnerOf(g, {1});
  for (int i = 0; i < 6; ++i) {
    if (OwnerOf(g, {i + 1}) != freed) continue;
    g.dp->Abort(streams[i]->id());
    auto c = streams[i]->Next(std::chrono::seconds(5));
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->finish, FinishReason::kAbort);
  }
  for (int i = 0; i < 2; ++i) {
    streams.push_back(MustSubmit(*g.dp, Req({100 + i})));
    EXPECT_EQ(OwnerOf(g, {100 + i}), freed) << i;
  }
  // Dropping a stream unread releases its load too: drop another replica's two.
  const int other = (freed + 1) % 3;
  for (int i = 0; i < 6; ++i) {
    if (OwnerOf(g, {i + 1}) == other) streams[i].reset();
  }
  for (int i = 0; i < 2; ++i) {
    streams.push_back(MustSubmit(*g.dp, Req({200 + i})));
    EXPECT_EQ(OwnerOf(g, {200 + i}), other) << i;
  }
}

TEST(DpEngine, CacheAwareKeepsSharedPrefixesTogetherAndSpreadsUnrelated) {
  std::mt19937 rng(5);
  Group g = MakeGroup(2, LoadBalanceMethod::kCacheAware, /*finish=*/false);
  std::vector<std::unique_ptr<RequestStream>> streams;
  // Two families of prompts: a 64-token stem each, then 16 tokens of their own.
  const std::vector<int32_t> stem_a = RandomPrompt(rng, 64), stem_b = RandomPrompt(rng, 64);
  std::vector<std::vector<int32_t>> fam_a, fam_b;
  for (int i = 0; i < 6; ++i) {
    for (auto* fam : {&fam_a, &fam_b}) {
      std::vector<int32_t> p = fam == &fam_a ? stem_a : stem_b;
      std::vector<int32_t> tail = RandomPrompt(rng, 16);
      p.insert(p.end(), tail.begin(), tail.end());
      auto s = g.dp->Submit(Req(p));
      ASSERT_TRUE(s.ok());
      streams.push_back(std::move(*s));
      fam->push_back(p);
    }
  }
  const int owner_a = OwnerOf(g, fam_a[0]);
  const int owner_b = OwnerOf(g, fam_b[0]);
  EXPECT_NE(owner_a, owner_b) << "unrelated first prompts go by load";
  for (const auto& p : fam_a) EXPECT_EQ(OwnerOf(g, p), owner_a);
  for (const auto& p : fam_b) EXPECT_EQ(OwnerOf(g, p), owner_b);
  // Unrelated prompts spread over both replicas.
  std::vector<int> count(2, 0);
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p = RandomPrompt(rng, 80);
    streams.push_back(MustSubmit(*g.dp, Req(p)));
    ++count[OwnerOf(g, p)];
  }
  EXPECT_EQ(count[0], 5);
  EXPECT_EQ(count[1], 5);
}

TEST(DpEngine, AbortReachesTheOwningReplicaOnly) {
  Group g = MakeGroup(2, LoadBalanceMethod::kRoundRobin, /*finish=*/false);
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(MustSubmit(*g.dp, Req({i + 1})));
  // Request 3 (index 2) went to replica 0 as its local id 2; replica 1 also has a local id 2.
  ASSERT_EQ(OwnerOf(g, {3}), 0);
  g.dp->Abort(streams[2]->id());
  {
    std::lock_guard<std::mutex> l(g.logs[0]->mu);
    EXPECT_EQ(g.logs[0]->aborted, (std::vector<RequestId>{2}));
  }
  {
    std::lock_guard<std::mutex> l(g.logs[1]->mu);
    EXPECT_TRUE(g.logs[1]->aborted.empty());
  }
  auto c = streams[2]->Next(std::chrono::seconds(5));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->finish, FinishReason::kAbort);
  EXPECT_FALSE(streams[3]->Next(std::chrono::milliseconds(5)).has_value()) << "still running";
  g.dp->Abort(987654);            // unknown: ignored
  g.dp->Abort(streams[2]->id());  // finished: ignored
  std::lock_guard<std::mutex> l(g.logs[0]->mu);
  EXPECT_EQ(g.logs[0]->aborted.size(), 1u);
}

TEST(DpEngine, FullReplicaIsSkippedAndAllFullIsResourceExhausted) {
  Group g = MakeGroup(2, LoadBalanceMethod::kRoundRobin, /*finish=*/false, {1, 2});
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) {
    auto s = g.dp->Submit(Req({i + 1}));
    ASSERT_TRUE(s.ok()) << i << ": " << s.status().ToString();
    streams.push_back(std::move(*s));
  }
  EXPECT_EQ(OwnerOf(g, {1}), 0);
  EXPECT_EQ(OwnerOf(g, {2}), 1);
  EXPECT_EQ(OwnerOf(g, {3}), 1);  // round robin chose 0, which is full
  auto s = g.dp->Submit(Req({4}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
}

TEST(DpEngine, StatsSumTheReplicas) {
  Group g = MakeGroup(2, LoadBalanceMethod::kRoundRobin, /*finish=*/false);
  auto a = g.dp->Submit(Req({1, 2, 3}));
  auto b = g.dp->Submit(Req({4, 5}));
  EngineStats s = g.dp->Stats();
  EXPECT_EQ(s.gauges.running, 2);
  EXPECT_EQ(s.counters.prompt_tokens_total, 5);
  EXPECT_EQ(s.gauges.kv_pages_total, 100 + 101);
  EXPECT_EQ(s.gauges.kv_pages_used, 1);
  EXPECT_EQ(s.gauges.kv_page_size, 16);
  EXPECT_EQ(s.spec.verify_steps, 3);
  EXPECT_DOUBLE_EQ(s.spec.accept_length_mean, (1.0 * 1 + 2.0 * 2) / 3);
  EXPECT_EQ(s.spec.proposed_at, (std::vector<int64_t>{3, 2}));
  ASSERT_EQ(s.dp_replicas.size(), 2u);
  EXPECT_EQ(s.dp_replicas[1].kv_pages_total, 101);
  EXPECT_EQ(s.dp_replicas[0].running, 1);
}

void Fail(const Group& g, int r, const std::string& why, bool hidden = false) {
  std::lock_guard<std::mutex> l(g.logs[r]->mu);
  g.logs[r]->health = Status(StatusCode::kUnavailable, "engine failed: " + why);
  g.logs[r]->hide_health = hidden;
}

int64_t Submits(const Group& g, int r) {
  std::lock_guard<std::mutex> l(g.logs[r]->mu);
  return g.logs[r]->submits;
}

class DpReplicaFailure : public ::testing::TestWithParam<LoadBalanceMethod> {};

// Whatever the method, a failed replica is sent nothing more (cache_aware: not even prompts its
// prefix tree holds); the other serves everything, and the group stays healthy.
TEST_P(DpReplicaFailure, FailedReplicaIsOutOfRotation) {
  Group g = MakeGroup(2, GetParam(), /*finish=*/true);
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(RandomPrompt(rng, 32));
  for (const auto& p : prompts) ASSERT_FALSE(Drain(*MustSubmit(*g.dp, Req(p))).timed_out);
  ASSERT_GT(Submits(g, 0), 0) << "both replicas served before the failure";
  Fail(g, 0, "tp rank 3 died");
  const int64_t before = Submits(g, 0);
  EXPECT_TRUE(g.dp->Health().ok()) << g.dp->Health().ToString();
  for (int i = 0; i < 12; ++i) {
    // Half repeat the earlier prompts (some of them replica 0's), half are new.
    const std::vector<int32_t> p = i % 2 == 0 ? prompts[(i / 2) % 4] : RandomPrompt(rng, 32);
    auto s = g.dp->Submit(Req(p));
    ASSERT_TRUE(s.ok()) << i << ": " << s.status().ToString();
    StreamResult out = Drain(**s);
    ASSERT_FALSE(out.timed_out);
    EXPECT_EQ(out.tokens, (std::vector<int32_t>{1})) << "served by replica 1, request " << i;
  }
  EXPECT_EQ(Submits(g, 0), before) << "the router sent requests to the failed replica";
  EngineStats s = g.dp->Stats();
  ASSERT_EQ(s.dp_replicas.size(), 2u);
  EXPECT_FALSE(s.dp_replicas[0].healthy);
  EXPECT_TRUE(s.dp_replicas[1].healthy);
}

INSTANTIATE_TEST_SUITE_P(Methods, DpReplicaFailure,
                         ::testing::Values(LoadBalanceMethod::kRoundRobin,
                                           LoadBalanceMethod::kLeastLoad,
                                           LoadBalanceMethod::kCacheAware),
                         [](const auto& info) {
                           return std::string(LoadBalanceMethodName(info.param));
                         });

TEST(DpEngine, AllReplicasFailedIsUnavailableNamingEach) {
  Group g = MakeGroup(2, LoadBalanceMethod::kRoundRobin, /*finish=*/true);
  Fail(g, 1, "peer 1 gone");
  EXPECT_TRUE(g.dp->Health().ok());
  Fail(g, 0, "peer 0 gone");
  const Status h = g.dp->Health();
  EXPECT_EQ(h.code(), StatusCode::kUnavailable);
  EXPECT_NE(h.message().find("replica 0: engine failed: peer 0 gone"), std::string::npos)
      << h.message();
  EXPECT_NE(h.message().find("replica 1: engine failed: peer 1 gone"), std::string::npos)
      << h.message();
  auto s = g.dp->Submit(Req({1, 2, 3}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("replica 0: engine failed: peer 0 gone"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("replica 1: engine failed: peer 1 gone"), std::string::npos)
      << s.status().message();
  EXPECT_EQ(Submits(g, 0) + Submits(g, 1), 0);
  for (const DpReplicaStats& r : g.dp->Stats().dp_replicas) EXPECT_FALSE(r.healthy);
}

// A replica that fails between the health check and its Submit refuses with Unavailable: the
// request goes to the next replica, as from a full one.
TEST(DpEngine, ReplicaRefusingWithUnavailableIsSkipped) {
  Group g = MakeGroup(2, LoadBalanceMethod::kRoundRobin, /*finish=*/true);
  Fail(g, 0, "just died", /*hidden=*/true);
  for (int i = 0; i < 4; ++i) {
    auto s = g.dp->Submit(Req({i + 1}));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(Drain(**s).tokens, (std::vector<int32_t>{1}));
  }
  EXPECT_EQ(OwnerOf(g, {1}), 1);
  EXPECT_EQ(g.dp->Stats().dp_replicas[0].requests_routed, 0);
}

// ---- Real replicas: engines over FailingRunner (engine_test_util.h).

TEST(DpEngine, ReplicaWhoseRunnerBreaksIsTakenOutOfRotation) {
  const ModelConfig cfg = TinyTestConfig();
  EngineOptions o;
  o.page_size = 4;
  o.max_total_tokens = 1024;
  o.kv_cache_dtype = KvCacheDtype::kF32;
  std::vector<std::unique_ptr<Engine>> replicas;
  for (int r = 0; r < 2; ++r) {
    // Replica 0's runner breaks on its first forward; replica 1's never does.
    auto runner = std::make_unique<FailingRunner>(
        cfg, r == 0 ? 0 : int64_t{1} << 40, Status(StatusCode::kAborted, "allreduce aborted"));
    runner->Open();
    auto e = CreateEngineWithRunner(o, std::move(runner), std::nullopt, {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    replicas.push_back(std::move(*e));
  }
  Engine* r0 = replicas[0].get();
  auto dp = MakeDpEngine(std::move(replicas), {.method = LoadBalanceMethod::kRoundRobin});
  // Round robin sends the first request to replica 0, which fails with it.
  StreamResult first = Drain(*MustSubmit(*dp, Greedy({5, 6, 7}, 6)));
  ASSERT_FALSE(first.timed_out);
  EXPECT_EQ(first.last.error.code(), StatusCode::kAborted) << first.last.error.ToString();
  EXPECT_EQ(r0->Health().message(), "engine failed: allreduce aborted");
  EXPECT_TRUE(dp->Health().ok());
  std::mt19937 rng(4);
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = RandomPrompt(rng, 4 + i);
    for (int32_t& t : p) t %= static_cast<int32_t>(cfg.vocab_size);
    StreamResult out = Drain(*MustSubmit(*dp, Greedy(p, 6)));
    ASSERT_FALSE(out.timed_out);
    EXPECT_TRUE(out.last.error.ok()) << i << ": " << out.last.error.ToString();
    EXPECT_EQ(out.tokens, FakeGreedy(p, 6, cfg.vocab_size)) << i;
  }
  EngineStats s = dp->Stats();
  ASSERT_EQ(s.dp_replicas.size(), 2u);
  EXPECT_FALSE(s.dp_replicas[0].healthy);
  EXPECT_TRUE(s.dp_replicas[1].healthy);
  EXPECT_EQ(s.dp_replicas[0].requests_routed, 1);
  EXPECT_EQ(s.dp_replicas[1].requests_routed, 6);
}

// ---- Real replicas of the tiny checkpoint.

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

EngineOptions TinyOptions() {
  EngineOptions o;
  o.model.model_dir = kTiny;
  o.threads = 2;
  o.page_size = 4;
  o.max_total_tokens = 2048;
  o.chunked_prefill_size = 64;
  return o;
}

TEST(DpEngine, GreedyTokensEqualOneEngine) {
  auto one = CreateEngine(TinyOptions());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto dp = CreateDpEngine(TinyOptions(), 2, {.method = LoadBalanceMethod::kRoundRobin});
  ASSERT_TRUE(dp.ok()) << dp.status().ToString();
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p(5 + rng() % 20);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 300);
    prompts.push_back(p);
  }
  auto greedy = [](const std::vector<int32_t>& p) {
    GenerationRequest r;
    r.prompt = p;
    r.max_tokens = 8;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    return r;
  };
  // All at once on the group (both replicas busy), one by one on the single engine.
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {
    auto s = (*dp)->Submit(greedy(p));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(std::move(*s));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s1 = (*one)->Submit(greedy(prompts[i]));
    ASSERT_TRUE(s1.ok());
    StreamResult want = Drain(**s1);
    StreamResult got = Drain(*streams[i]);
    ASSERT_FALSE(got.timed_out);
    EXPECT_EQ(got.tokens, want.tokens) << "prompt " << i;
    EXPECT_EQ(got.tokens.size(), 8u);
  }
  EngineStats s = (*dp)->Stats();
  ASSERT_EQ(s.dp_replicas.size(), 2u);
  EXPECT_EQ(s.dp_replicas[0].requests_routed, 3);
  EXPECT_EQ(s.dp_replicas[1].requests_routed, 3);
  EXPECT_EQ(s.dp_replicas[0].kv_pages_total, 2048 / 4);
  EXPECT_EQ(s.gauges.kv_pages_total, 2 * 2048 / 4);
}

TEST(DpEngine, RefusesBadDpNamingTheFlag) {
  auto zero = CreateDpEngine(TinyOptions(), 0, {});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("--dp must be >= 1, got 0"), std::string::npos);
  // Far more replicas than memory holds: refused before loading any.
  auto huge = CreateDpEngine(TinyOptions(), 1 << 30, {});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("--dp 1073741824"), std::string::npos)
      << huge.status().message();
  // A replica's own load error says which replica.
  EngineOptions bad = TinyOptions();
  bad.page_size = 0;
  auto e = CreateDpEngine(bad, 2, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--dp 2: replica 0"), std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace mx
