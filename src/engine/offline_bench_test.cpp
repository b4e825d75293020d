// llama-bench's tests over a runner: the test list and names, the forwards each test makes
// (chunks, positions, warm-up) on a recording runner, the statistics, and a real run on the
// tiny checkpoint whose chunked prefill leaves the same KV as one pass.
#include "engine/offline_bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/model_factory.h"

namespace mx::offline_bench_test {
namespace {

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

// Records every forward as (start_pos, tokens); fails the `fail_at`-th call (0-based) if set.
class RecordingRunner final : public ModelRunner {
 public:
  explicit RecordingRunner(int64_t vocab) {
    c_.vocab_size = vocab;
    c_.max_position_embeddings = 1 << 20;
  }
  const ModelConfig& config() const override { return c_; }
  Result<std::vector<float>> Forward(const ForwardBatch& b, KvStore&) override {
    if (static_cast<int>(calls.size()) == fail_at) return Internal("forward {} failed", fail_at);
    EXPECT_EQ(b.seqs.size(), 1u);
    EXPECT_EQ(b.seqs[0].seq, 0);
    for (int32_t t : b.seqs[0].tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, c_.vocab_size);
    }
    calls.push_back({b.seqs[0].start_pos, static_cast<int64_t>(b.seqs[0].tokens.size())});
    return std::vector<float>(static_cast<size_t>(c_.vocab_size), 0.0f);
  }
  std::vector<std::pair<int64_t, int64_t>> calls;  // (start_pos, tokens)
  int fail_at = -1;

 private:
  ModelConfig c_;
};

using Calls = std::vector<std::pair<int64_t, int64_t>>;

// A store the recording runner never touches.
class NullKvStore final : public KvStore {
 public:
  Status Reserve(int64_t, int64_t) override { return Status::Ok(); }
  void WriteMlaRow(int64_t, int64_t, int64_t, const float*) override {}
  void ReadMlaRow(int64_t, int64_t, int64_t, float*) override {}
  void WriteIndexerKeyRow(int64_t, int64_t, int64_t, const float*) override {}
  void ReadIndexerKeyRow(int64_t, int64_t, int64_t, float*) override {}
};

TEST(OfflineBench, TestListAndNamesFollowLlamaBench) {
  auto t = MakeBenchTests({512, 0, 64}, {128, 0}, {{4096, 32}, {0, 0}});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 4u);  // zeros skipped
  EXPECT_EQ((*t)[0], (BenchTest{512, 0}));
  EXPECT_EQ((*t)[0].Name(), "pp512");
  EXPECT_EQ((*t)[1].Name(), "pp64");
  EXPECT_EQ((*t)[2].Name(), "tg128");
  EXPECT_EQ((*t)[3].Name(), "tg32@pp4096");
  EXPECT_EQ((*t)[3].timed_tokens(), 32);
  EXPECT_EQ((*t)[3].positions(), 4128);
  EXPECT_EQ((*t)[0].timed_tokens(), 512);
  // side_by_side.py's calls: `-p N -n 0`, `-p 0 -n N`, `-p 0 -n 0 -gp P,G`.
  EXPECT_EQ(MakeBenchTests({0}, {0}, {{512, 16}})->size(), 1u);
  EXPECT_TRUE(MakeBenchTests({0}, {0}, {})->empty());
  auto neg = MakeBenchTests({-1}, {}, {});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("-p"), std::string::npos);
  EXPECT_FALSE(MakeBenchTests({}, {-3}, {}).ok());
  EXPECT_FALSE(MakeBenchTests({}, {}, {{5, -1}}).ok());
}

TEST(OfflineBench, PrefillIsChunkedInOrder) {
  RecordingRunner r(100);
  NullKvStore kv;
  std::mt19937_64 rng(3);
  const auto ids = RandomTokenIds(130, 100, rng);
  auto step = [&](const ForwardBatch& b) { return r.Forward(b, kv).status(); };
  ASSERT_TRUE(PrefillChunked(step, 0, 7, ids, 64).ok());
  EXPECT_EQ(r.calls, (Calls{{7, 64}, {71, 64}, {135, 2}}));
}

TEST(OfflineBench, EachTestMakesLlamaBenchsForwards) {
  NullKvStore kv;
  BenchOptions o;
  o.chunk = 64;
  o.repetitions = 2;
  {
    RecordingRunner r(50);
    auto s = RunBenchTest(r, kv, {130, 0}, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    // Warm-up: one chunk; then two runs of three chunks.
    EXPECT_EQ(r.calls, (Calls{{0, 64}, {0, 64}, {64, 64}, {128, 2}, {0, 64}, {64, 64}, {128, 2}}));
    ASSERT_EQ(s->tokens_per_second.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_GT(s->seconds[i], 0);
      EXPECT_NEAR(s->tokens_per_second[i], 130 / s->seconds[i], 1e-9 * s->tokens_per_second[i]);
    }
  }
  {
    RecordingRunner r(50);
    auto s = RunBenchTest(r, kv, {0, 3}, o);
    ASSERT_TRUE(s.ok());
    // Warm-up: one decode step; then two runs of 3 steps from position 0.
    EXPECT_EQ(r.calls, (Calls{{0, 1}, {0, 1}, {1, 1}, {2, 1}, {0, 1}, {1, 1}, {2, 1}}));
  }
  {
    RecordingRunner r(50);
    o.repetitions = 1;
    auto s = RunBenchTest(r, kv, {70, 2}, o);
    ASSERT_TRUE(s.ok());
    // Warm-up: a chunk and a step; then the prompt in two chunks and 2 steps after it.
    EXPECT_EQ(r.calls, (Calls{{0, 64}, {0, 1}, {0, 64}, {64, 6}, {70, 1}, {71, 1}}));
    EXPECT_EQ(s->test.Name(), "tg2@pp70");
    EXPECT_EQ(s->stddev_tps, 0.0);  // one run
  }
}

TEST(OfflineBench, WeightWarmUpIsOneChunkedPrefill) {
  RecordingRunner r(50);
  NullKvStore kv;
  ASSERT_TRUE(WarmUpWeights(r, kv, 100, 64).ok());
  EXPECT_EQ(r.calls, (Calls{{0, 64}, {64, 36}}));
  r.fail_at = 2;
  auto st = WarmUpWeights(r, kv, 10, 64);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("warm-up"), std::string::npos);
}

TEST(OfflineBench, ErrorsPropagateAndBadOptionsAreRefused) {
  NullKvStore kv;
  RecordingRunner r(50);
  r.fail_at = 2;
  auto s = RunBenchTest(r, kv, {0, 8}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
  EXPECT_NE(s.status().message().find("tg8"), std::string::npos) << s.status().ToString();
  RecordingRunner ok(50);
  EXPECT_EQ(RunBenchTest(ok, kv, {8, 0}, {.repetitions = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunBenchTest(ok, kv, {8, 0}, {.chunk = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunBenchTest(ok, kv, {0, 0}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ok.calls.empty());
}

TEST(OfflineBench, MeanAndSampleStddev) {
  auto [m, sd] = MeanAndStddev({2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0});
  EXPECT_DOUBLE_EQ(m, 5.0);
  EXPECT_NEAR(sd, std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_EQ(MeanAndStddev({3.5}), std::make_pair(3.5, 0.0));
  EXPECT_EQ(MeanAndStddev({}), std::make_pair(0.0, 0.0));
}

TEST(OfflineBench, SingleSequenceStoreCoversThePositions) {
  auto loaded = LoadModel({.model_dir = kTiny, .tokenizer = TokenizerLoad::kNone});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto kv = MakeSingleSequenceKvStore(loaded->model->config(), KvCacheDtype::kBf16, 130, 64);
  EXPECT_EQ(kv->n_pages(), 3);
  EXPECT_EQ(kv->PageTable(0), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(kv->Reserve(0, 130).ok());
  EXPECT_FALSE(kv->Reserve(0, 193).ok());
}

// The real runner on the tiny model: every test runs, and a prefill in chunks of 5 leaves the
// sequence's KV as one pass does (the next decode step's logits match).
TEST(OfflineBench, TinyModelRunsEveryTestAndChunksAgreeWithOnePass) {
  auto loaded = LoadModel({.model_dir = kTiny, .tokenizer = TokenizerLoad::kNone});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const ModelConfig c = loaded->model->config();
  auto runner = MakeModelRunner(*loaded, 1);
  ASSERT_TRUE(runner.ok());
  auto kv = MakeSingleSequenceKvStore(c, KvCacheDtype::kF32, 64, 16);
  for (const BenchTest& t : {BenchTest{24, 0}, BenchTest{0, 8}, BenchTest{20, 4}}) {
    auto s = RunBenchTest(**runner, *kv, t, {.chunk = 5, .repetitions = 2});
    ASSERT_TRUE(s.ok()) << t.Name() << ": " << s.status().ToString();
    ASSERT_EQ(s->tokens_per_second.size(), 2u);
    for (double v : s->tokens_per_second) EXPECT_TRUE(std::isfinite(v) && v > 0) << t.Name();
    EXPECT_GT(s->avg_tps, 0);
  }
  std::mt19937_64 rng(11);
  const auto ids = RandomTokenIds(23, c.vocab_size, rng);
  auto next_logits = [&](int64_t chunk) {
    auto step = [&](const ForwardBatch& b) { return (*runner)->Forward(b, *kv).status(); };
    EXPECT_TRUE(PrefillChunked(step, 0, 0, ids, chunk).ok());
    ForwardBatch d;
    d.seqs.push_back({0, 23, {42}, {}});
    auto out = (*runner)->Forward(d, *kv);
    EXPECT_TRUE(out.ok());
    return out.ok() ? *out : std::vector<float>{};
  };
  const std::vector<float> one = next_logits(64), chunked = next_logits(5);
  ASSERT_EQ(one.size(), chunked.size());
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(one[i]));
    max_diff = std::max(max_diff, std::abs(one[i] - chunked[i]));
  }
  // Other GEMM shapes round differently; a wrong position or chunk boundary is O(max_abs).
  EXPECT_LE(max_diff, 1e-4f * std::max(1.0f, max_abs));
  EXPECT_EQ(std::max_element(one.begin(), one.end()) - one.begin(),
            std::max_element(chunked.begin(), chunked.end()) - chunked.begin());
}

}  // namespace
}  // namespace mx::offline_bench_test
