// The tensor / expert parallel runner under the real engine (continuous batching, chunked
// prefill, radix-cache page sharing, speculative decoding): `--tp 2` and `--ep 2` give every
// request the same greedy tokens as one rank, and a rank that stops makes the next forward fail
// with Unavailable instead of hanging.
#include "engine/tp_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "kv/paged_kv_store.h"

namespace mx::tp_runner_test {
namespace {

const std::string kBundled = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";
const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny-glm52";

// Prompts sharing prefixes (so the radix cache hands pages of one request to the next) with
// fresh random tails.
std::vector<std::vector<int32_t>> Prompts(int64_t vocab, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> shared(70);
  for (auto& t : shared) t = tok(rng);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(shared.begin(), shared.begin() + (i % 2 == 0 ? 70 : 20));
    for (int j = 0; j < 5 + 7 * i; ++j) p.push_back(tok(rng));
    out.push_back(std::move(p));
  }
  return out;
}

// Greedy tokens of every prompt, all submitted at once (they batch together).
std::vector<std::vector<int32_t>> Serve(const std::string& dir, int tp, bool ep, int spec_steps,
                                        const std::vector<std::vector<int32_t>>& prompts) {
  EngineOptions o;
  o.model.model_dir = dir;
  o.threads = 2;
  o.tp = tp;
  o.expert_parallel = ep;
  o.page_size = 16;
  o.max_total_tokens = 4096;
  o.chunked_prefill_size = 48;  // long prompts prefill in chunks
  o.kv_cache_dtype = KvCacheDtype::kF32;
  if (spec_steps > 0) {
    o.speculative.algorithm = SpeculativeAlgorithm::kMtp;
    o.speculative.num_steps = spec_steps;
  }
  auto e = CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return {};
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {
    GenerationRequest r;
    r.prompt = p;
    r.max_tokens = 24;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    auto s = (*e)->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return {};
    streams.push_back(std::move(s).value());
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& s : streams) {
    StreamResult r = Drain(*s);
    EXPECT_FALSE(r.timed_out);
    EXPECT_TRUE(r.last.error.ok()) << r.last.error.ToString();
    out.push_back(r.tokens);
  }
  (*e)->Shutdown(std::chrono::seconds(5));
  return out;
}

struct Case {
  std::string name;
  std::string dir;
  bool ep;
  int spec_steps;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class TpEngineTest : public ::testing::TestWithParam<Case> {};

TEST_P(TpEngineTest, SameGreedyTokensAsOneRank) {
  const Case& c = GetParam();
  const int64_t vocab = c.dir == kBundled ? 2048 : 320;
  const auto prompts = Prompts(vocab, 6, 11);
  const auto ref = Serve(c.dir, 1, false, 0, prompts);
  ASSERT_EQ(ref.size(), prompts.size());
  const auto got = Serve(c.dir, 2, c.ep, c.spec_steps, prompts);
  ASSERT_EQ(got.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(ref[i].size(), 24u) << i;
    EXPECT_EQ(got[i], ref[i]) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, TpEngineTest,
                         ::testing::Values(Case{"bundled_tp2", kBundled, false, 0},
                                           Case{"bundled_ep2", kBundled, true, 0},
                                           Case{"bundled_tp2_mtp3", kBundled, false, 3},
                                           Case{"tiny_glm52_tp2", kTiny, false, 0},
                                           Case{"tiny_glm52_ep2", kTiny, true, 0}),
                         [](const auto& info) { return info.param.name; });

TEST(TpRunner, ARankThatStopsFailsTheNextForwardWithUnavailable) {
  std::vector<std::unique_ptr<Model>> shards;
  for (int r = 0; r < 2; ++r) {
    auto m = Model::Load(kTiny, nullptr, ModelShard{r, 2, false});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    shards.push_back(std::move(m).value());
  }
  const ModelConfig c = shards[0]->config();
  auto runner = InProcessTpRunner::Create(std::move(shards), SelectKernels(), 2, {});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  PagedKvStore kv(c, 16, 8, KvCacheDtype::kF32);
  kv.PageTable(1) = {3, 5};
  ForwardBatch b;
  b.seqs.push_back({1, 0, {1, 2, 3, 4, 5}, {}, false});
  auto ok = (*runner)->Forward(b, kv);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(static_cast<int64_t>(ok->size()), c.vocab_size);
  (*runner)->FailRank(1, "killed by the test");
  ForwardBatch d;
  d.seqs.push_back({1, 5, {6}, {}, false});
  auto failed = (*runner)->Forward(d, kv);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("killed by the test"), std::string::npos)
      << failed.status().ToString();
}

TEST(TpRunner, RefusesAContiguousKvStoreAndBadGroups) {
  std::vector<std::unique_ptr<Model>> one;
  auto m = Model::Load(kTiny);
  ASSERT_TRUE(m.ok());
  one.push_back(std::move(m).value());
  EXPECT_FALSE(InProcessTpRunner::Create(std::move(one), SelectKernels(), 1, {}).ok());
  std::vector<std::unique_ptr<Model>> shards;
  for (int r = 0; r < 2; ++r) {
    auto s = Model::Load(kTiny, nullptr, ModelShard{r, 2});
    ASSERT_TRUE(s.ok());
    shards.push_back(std::move(s).value());
  }
  auto runner = InProcessTpRunner::Create(std::move(shards), SelectKernels(), 2, {});
  ASSERT_TRUE(runner.ok());
  ContiguousKvStore kv((*runner)->config(), 32);
  const int64_t seq = kv.AddSequence();
  ForwardBatch b;
  b.seqs.push_back({seq, 0, {1, 2}, {}, false});
  auto r = (*runner)->Forward(b, kv);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  // The group still works on a paged store afterwards (the refusal broadcast nothing).
  PagedKvStore paged((*runner)->config(), 16, 4, KvCacheDtype::kBf16);
  paged.PageTable(9) = {2};
  b.seqs[0].seq = 9;
  EXPECT_TRUE((*runner)->Forward(b, paged).ok());
}

}  // namespace
}  // namespace mx::tp_runner_test
