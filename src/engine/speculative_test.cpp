// MTP speculative decoding: greedy outputs token-identical to decoding without it (bundled model
// and both test checkpoints; alone and batched; bf16 and fp8 KV; several step counts), KV rows
// after accept/reject identical to a fresh prefill over the accepted tokens (f32 KV, every
// layer including the MTP layer), rejection sampling distributed as the target (chi-square),
// the counters, and the flags that are refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "base/thread_pool.h"
#include "engine/arith_prompts_test_util.h"
#include "engine/engine.h"
#include "engine/engine_factory.h"
#include "engine/engine_test_util.h"
#include "engine/model_factory.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "kernels/kernels.h"
#include "kv/paged_kv_store.h"
#include "model/model.h"
#include "quant/quantizer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx::speculative_test {
namespace {

// Under AddressSanitizer (-O1, ~30x slower here) the tests shrink: the statistics and the
// 50-prompt equivalences are the release build's job; the sanitizer build checks memory safety
// on the same paths.
#ifdef __SANITIZE_ADDRESS__
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";
const std::string kTinyGlm52 = std::string(MX_TEST_DATA_DIR) + "/tiny-glm52";
const std::string kBundled = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";

std::vector<std::vector<int32_t>> RandomPrompts(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> out(n);
  for (auto& p : out) {
    const int len = 3 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) p.push_back(static_cast<int32_t>(rng() % vocab));
  }
  return out;
}

EngineOptions Options(const std::string& dir, const std::string& kv, int steps) {
  EngineOptions o;
  o.model.model_dir = dir;
  o.threads = 1;
  o.page_size = 4;
  o.max_total_tokens = 8192;
  o.chunked_prefill_size = 32;
  auto dtype = ParseKvCacheDtype(kv);
  EXPECT_TRUE(dtype.ok()) << kv;
  if (dtype.ok()) o.kv_cache_dtype = *dtype;
  if (steps > 0) {
    o.speculative.algorithm = SpeculativeAlgorithm::kMtp;
    o.speculative.num_steps = steps;
  }
  return o;
}

GenerationRequest Greedy(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Every prompt alone (one after another), or all submitted at once (batched).
std::vector<std::vector<int32_t>> Generate(Engine& e, const std::vector<std::vector<int32_t>>& ps,
                                           int32_t max_tokens, bool batched,
                                           bool ignore_eos = false) {
  std::vector<std::vector<int32_t>> out(ps.size());
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerationRequest req = Greedy(ps[i], max_tokens);
    req.ignore_eos = ignore_eos;
    auto s = e.Submit(req);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return out;
    if (batched) {
      streams.push_back(std::move(*s));
      continue;
    }
    StreamResult r = Drain(**s);
    EXPECT_FALSE(r.timed_out);
    EXPECT_TRUE(r.last.error.ok()) << r.last.error.ToString();
    out[i] = r.tokens;
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamResult r = Drain(*streams[i]);
    EXPECT_FALSE(r.timed_out);
    EXPECT_TRUE(r.last.error.ok()) << r.last.error.ToString();
    out[i] = r.tokens;
  }
  return out;
}

std::unique_ptr<Engine> Make(const EngineOptions& o) {
  auto e = CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

struct Case {
  std::string name, dir, kv;
  int steps;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Greedy outputs of 50 prompts with MTP speculation (alone and batched) are the tokens without
// it, and the acceptance counters add up.
void ExpectGreedyIdentical(const Case& c) {
  auto base = Make(Options(c.dir, c.kv, 0));
  auto spec = Make(Options(c.dir, c.kv, c.steps));
  ASSERT_TRUE(base && spec);
  const int n = kSanitized ? 3 : 50;
  const bool bundled = c.name.rfind("bundled", 0) == 0;  // the bundled model or a copy
  const auto prompts = bundled ? ArithPrompts(n) : RandomPrompts(n, 300, 7);
  const int32_t max_tokens = kSanitized ? 12 : 24;
  const auto want = Generate(*base, prompts, max_tokens, /*batched=*/false);
  const auto alone = Generate(*spec, prompts, max_tokens, /*batched=*/false);
  const auto batched = Generate(*spec, prompts, max_tokens, /*batched=*/true);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_FALSE(want[i].empty());
    EXPECT_EQ(alone[i], want[i]) << "prompt " << i << " alone";
    EXPECT_EQ(batched[i], want[i]) << "prompt " << i << " batched";
  }
  const EngineStats st = spec->Stats();
  EXPECT_GT(st.spec.verify_steps, 0);
  EXPECT_GT(st.spec.drafts_proposed, 0);
  EXPECT_LE(st.spec.tokens_accepted, st.spec.drafts_proposed);
  // Every draft is a row of an MTP pass (the draft-extend's last row or a draft step's), and
  // the prompts went through it too; without speculation nothing did.
  EXPECT_GT(st.spec.mtp_rows, st.spec.drafts_proposed);
  EXPECT_GT(st.spec.mtp_seconds, 0);
  EXPECT_GT(st.counters.forward_seconds, 0);
  EXPECT_EQ(base->Stats().spec.mtp_rows, 0);
  EXPECT_EQ(base->Stats().spec.mtp_seconds, 0);
  EXPECT_GT(base->Stats().counters.forward_seconds, 0);
  ASSERT_EQ(st.spec.proposed_at.size(), static_cast<size_t>(c.steps));
  int64_t acc = 0, prop = 0;
  for (int i = 0; i < c.steps; ++i) {
    acc += st.spec.accepted_at[i];
    prop += st.spec.proposed_at[i];
    if (i > 0) {
      EXPECT_LE(st.spec.accepted_at[i], st.spec.accepted_at[i - 1]);
    }
  }
  EXPECT_EQ(acc, st.spec.tokens_accepted);
  EXPECT_EQ(prop, st.spec.drafts_proposed);
  EXPECT_NEAR(st.spec.accept_length_mean,
              1.0 + static_cast<double>(acc) / static_cast<double>(st.spec.verify_steps), 1e-9);
  if (bundled) {
    // The trained MTP head guesses the worked answers well: drafts must be accepted often.
    EXPECT_GT(st.spec.accept_length_mean, 1.5) << "accepted " << acc << " of " << prop;
  }
}

class GreedyIdentical : public ::testing::TestWithParam<Case> {};

TEST_P(GreedyIdentical, FiftyPromptsAloneAndBatched) { ExpectGreedyIdentical(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Speculative, GreedyIdentical,
                         ::testing::Values(Case{"bundled_bf16_5", kBundled, "bf16", 5},
                                           Case{"bundled_fp8_3", kBundled, "fp8_e4m3", 3},
                                           Case{"bundled_bf16_1", kBundled, "bf16", 1},
                                           Case{"tiny_bf16_3", kTiny, "bf16", 3},
                                           Case{"tiny_fp8_5", kTiny, "fp8_e4m3", 5},
                                           Case{"tinyglm52_bf16_5", kTinyGlm52, "bf16", 5},
                                           Case{"tinyglm52_fp8_2", kTinyGlm52, "fp8_e4m3", 2}),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// The bundled model with FP8 block-scaled weights (`quantize --format fp8`: the MTP layer's
// matrices FP8 too) speculates like the bf16 one: token-identical, drafts accepted often.
TEST(Speculative, GreedyIdenticalWithFp8Weights) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mx_spec_fp8_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  quant::QuantizeOptions q;
  q.format = "fp8";
  q.threads = 2;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(kBundled) / f)) << f;
  }
  auto r = quant::QuantizeCheckpoint(kBundled, dir.string(), q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectGreedyIdentical(Case{"bundled_fp8_weights", dir.string(), "bf16", 3});
  std::filesystem::remove_all(dir);
}

// With few KV pages the engine retracts requests mid-decode; speculation must survive it and
// a radix-cache hit, and still give the same tokens.
TEST(Speculative, GreedyIdenticalUnderRetractionAndCacheHits) {
  EngineOptions o = Options(kBundled, "bf16", 4);
  // Admission lets two requests in (prompt ~45 + 0.7 of 100 outputs each), whose ~150 tokens
  // each do not fit together: they must retract.
  o.max_total_tokens = 256;
  o.max_running_requests = 16;
  auto spec = Make(o);
  auto base = Make(Options(kBundled, "bf16", 0));
  ASSERT_TRUE(spec && base);
  auto prompts = ArithPrompts(kSanitized ? 4 : 16);
  for (int i = 0; i < 2; ++i) prompts.push_back(prompts[i]);  // exact repeats: cache hits
  const auto want = Generate(*base, prompts, 100, false, /*ignore_eos=*/true);
  const auto got = Generate(*spec, prompts, 100, true, /*ignore_eos=*/true);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
  const EngineStats st = spec->Stats();
  EXPECT_GT(st.counters.retractions, 0);
  EXPECT_GT(st.counters.cached_prompt_tokens_total, 0);
}

class Sink final : public ChunkSink {
 public:
  void Push(GenerationChunk c) override {
    if (c.finish != FinishReason::kNone) finished = true;
  }
  bool finished = false;
};

// After every step, each decoding request's KV rows 0..kv_len-1 (every layer and the MTP layer,
// MLA and indexer keys) equal those of one fresh prefill over its tokens: rejected drafts leave
// nothing behind, and the MTP layer's rows are those of (h_p, x_{p+1}) for the accepted tokens.
TEST(Speculative, RollbackLeavesCachesAsAFreshPrefill) {
  for (const std::string& dir : {kBundled, kTiny}) {
    auto model = Model::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const ModelConfig cfg = (*model)->config();
    const KernelTable& kt = SelectKernels();
    auto runner = MakeModelRunner(std::move(*model), kt, 1);
    auto fresh_model = Model::Load(dir);
    ASSERT_TRUE(fresh_model.ok());
    ThreadPool pool(1);
    SchedulerConfig sc;
    sc.page_size = 4;
    sc.n_pages = 512;
    sc.kv_dtype = KvCacheDtype::kF32;
    sc.context_window = cfg.max_position_embeddings;
    sc.spec_steps = 4;
    sc.spec_share_topk = cfg.index_share_for_mtp_iteration;
    Scheduler sched(sc, *runner, nullptr);
    const auto prompts = dir == kBundled ? ArithPrompts(3) : RandomPrompts(3, 300, 11);
    std::vector<std::shared_ptr<Sink>> sinks;
    for (size_t i = 0; i < prompts.size(); ++i) {
      sinks.push_back(std::make_shared<Sink>());
      GenerationRequest r = Greedy(prompts[i], 40);
      r.ignore_eos = true;
      sched.Add(static_cast<RequestId>(i + 1), r, sinks.back(), Clock::now());
    }
    const int64_t W = cfg.mla_cache_values(), Wi = cfg.index_head_dim;
    const int64_t n_layers = cfg.num_hidden_layers + 1;
    int64_t compared = 0;
    double worst = 0;
    while (sched.Step()) {
      for (const auto& v : sched.running_view()) {
        if (static_cast<int64_t>(v.tokens.size()) != v.kv_len + 1 || v.kv_len < 2) continue;
        ContiguousKvStore fresh(cfg, v.kv_len + 1);
        const int64_t seq = fresh.AddSequence();
        ForwardBatch fb;
        SequenceInput in;
        in.seq = seq;
        in.tokens.assign(v.tokens.begin(), v.tokens.begin() + v.kv_len);
        in.mtp_next.assign(v.tokens.begin() + 1, v.tokens.begin() + v.kv_len + 1);
        fb.seqs.push_back(in);
        auto out = (*fresh_model)->Forward(fb, ForwardOptions(), fresh, kt, pool);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        std::vector<float> a(std::max(W, Wi));
        for (int64_t l = 0; l < n_layers; ++l) {
          const bool full = cfg.is_full_indexer_layer(l);
          for (int64_t p = 0; p < v.kv_len; ++p) {
            sched.kv_store().ReadMlaRow(static_cast<int64_t>(v.id), l, p, a.data());
            const float* b = fresh.MlaRow(seq, l, p);
            for (int64_t k = 0; k < W; ++k) {
              const double d = std::abs(a[k] - b[k]) / (1.0 + std::abs(b[k]));
              worst = std::max(worst, d);
              ASSERT_LE(d, 1e-4) << dir << " layer " << l << " pos " << p << " value " << k;
            }
            if (!full) continue;
            sched.kv_store().ReadIndexerKeyRow(static_cast<int64_t>(v.id), l, p, a.data());
            const float* bi = fresh.IndexerKeyRow(seq, l, p);
            for (int64_t k = 0; k < Wi; ++k) {
              const double d = std::abs(a[k] - bi[k]) / (1.0 + std::abs(bi[k]));
              worst = std::max(worst, d);
              ASSERT_LE(d, 1e-4) << dir << " indexer layer " << l << " pos " << p;
            }
          }
        }
        ++compared;
      }
    }
    for (const auto& s : sinks) EXPECT_TRUE(s->finished);
    const EngineStats st = sched.stats();
    EXPECT_GT(compared, 20) << dir;
    // Both accepting and rejecting drafts happened, so both paths were compared.
    EXPECT_GT(st.spec.tokens_accepted, 0) << dir;
    EXPECT_LT(st.spec.tokens_accepted, st.spec.drafts_proposed) << dir;
    RecordProperty("worst_relative_difference_" + std::to_string(compared), std::to_string(worst));
  }
}

// --speculative-num-steps auto with a scripted schedule of drafts per decode step (the
// scheduler's test hook; the chooser itself is tested in spec_chooser_test.cpp): greedy outputs
// stay those without speculation while the drafts change mid-request (0 = no MTP pass, the
// skipped rows written later by a catch-up), and the MTP layer's rows that the catch-up writes
// are those of a fresh prefill.
struct AutoRun {
  std::vector<std::vector<int32_t>> tokens;  // per prompt
  EngineStats stats;
  int64_t caught_up = 0;  // steps where a request's MTP rows had lagged and then caught up
};

class TokenSink final : public ChunkSink {
 public:
  void Push(GenerationChunk c) override {
    tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
    if (c.finish != FinishReason::kNone) finished = true;
    if (!c.error.ok()) error = c.error;
  }
  std::vector<int32_t> tokens;
  bool finished = false;
  Status error;
};

SchedulerConfig AutoConfig(const ModelConfig& cfg, KvCacheDtype kv) {
  SchedulerConfig sc;
  sc.page_size = 4;
  sc.n_pages = 2048;
  sc.kv_dtype = kv;
  sc.context_window = cfg.max_position_embeddings;
  sc.spec_steps = 5;
  sc.spec_auto = true;
  sc.spec_share_topk = cfg.index_share_for_mtp_iteration;
  sc.chunked_prefill_size = 32;  // as Options(): the same chunks, the same numerics
  return sc;
}

// The runner an engine of Options(dir, ...) drives (tuned MoE configs and all), so that its
// outputs can be compared token for token with that engine's.
std::unique_ptr<ModelRunner> EngineRunner(const std::string& dir, ModelConfig* cfg,
                                          std::vector<int32_t>* eos_ids) {
  ModelLoadOptions lo;
  lo.model_dir = dir;
  lo.log_moe_tuning = false;
  auto loaded = LoadModel(lo);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return nullptr;
  *cfg = loaded->model->config();
  *eos_ids = loaded->eos_ids;
  auto runner = MakeModelRunner(*loaded, 1);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  return runner.ok() ? std::move(*runner) : nullptr;
}

AutoRun RunAuto(ModelRunner& runner, SchedulerConfig sc,
                const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens, bool batched,
                const SamplingParams* sampling = nullptr) {
  Scheduler sched(std::move(sc), runner, nullptr);
  AutoRun out;
  std::vector<std::shared_ptr<TokenSink>> sinks;
  std::map<RequestId, int64_t> lag;  // kv_len - mtp_len after the previous step
  auto drain = [&] {
    while (sched.Step()) {
      for (const auto& v : sched.running_view()) {
        const int64_t now = v.kv_len - v.mtp_len;
        if (lag[v.id] > 0 && now == 0) ++out.caught_up;
        lag[v.id] = now;
      }
    }
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    sinks.push_back(std::make_shared<TokenSink>());
    GenerationRequest r = Greedy(prompts[i], max_tokens);
    if (sampling != nullptr) {
      r.sampling = *sampling;
      r.sampling.seed = sampling->seed + i + 1;
      r.ignore_eos = true;
    }
    sched.Add(static_cast<RequestId>(i + 1), r, sinks.back(), Clock::now());
    if (!batched) drain();
  }
  drain();
  for (const auto& s : sinks) {
    EXPECT_TRUE(s->finished);
    EXPECT_TRUE(s->error.ok()) << s->error.ToString();
    out.tokens.push_back(s->tokens);
  }
  out.stats = sched.stats();
  return out;
}

// Drafts per decode step: off, several, off for a while, one, the most, ...
int32_t Scripted(int32_t /*chosen*/, int64_t step) {
  static constexpr int32_t kCycle[] = {0, 2, 0, 0, 5, 1, 3, 0, 0, 0, 4, 2, 0, 1};
  return kCycle[step % std::size(kCycle)];
}

TEST(SpeculativeAuto, GreedyIdenticalWhileTheDraftsChangeMidRequest) {
  for (const std::string& dir : {kBundled, kTinyGlm52}) {
    ModelConfig cfg;
    std::vector<int32_t> eos;
    auto runner = EngineRunner(dir, &cfg, &eos);
    ASSERT_TRUE(runner);
    auto base = Make(Options(dir, "bf16", 0));
    ASSERT_TRUE(base);
    const int n = kSanitized ? 3 : 24;
    const auto prompts = dir == kBundled ? ArithPrompts(n) : RandomPrompts(n, 300, 13);
    const int32_t max_tokens = 32;  // enough steps to meet every setting of the script
    const auto want = Generate(*base, prompts, max_tokens, /*batched=*/false);
    for (const bool batched : {false, true}) {
      SchedulerConfig sc = AutoConfig(cfg, KvCacheDtype::kBf16);
      sc.eos_ids = eos;
      sc.spec_schedule = Scripted;
      const AutoRun got = RunAuto(*runner, sc, prompts, max_tokens, batched);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(got.tokens[i], want[i]) << dir << " prompt " << i << " batched " << batched;
      }
      // Every setting of the script ran, and requests that skipped the MTP layer caught up.
      const auto& h = got.stats.spec.steps_histogram;
      ASSERT_EQ(h.size(), 6u);
      for (int s : {0, 1, 2, 3, 4, 5}) EXPECT_GT(h[s], 0) << dir << " steps " << s;
      EXPECT_GT(got.caught_up, 0) << dir;
      if (dir == kBundled) EXPECT_GT(got.stats.spec.tokens_accepted, 0);
      EXPECT_TRUE(got.stats.spec.automatic);
    }
    // A lag limit of 1: requests that skip two MTP rows draft no more, and still decode the same.
    SchedulerConfig sc = AutoConfig(cfg, KvCacheDtype::kBf16);
    sc.eos_ids = eos;
    sc.spec_schedule = Scripted;
    sc.spec_max_lag = 1;
    const AutoRun capped = RunAuto(*runner, sc, prompts, max_tokens, /*batched=*/true);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(capped.tokens[i], want[i]) << dir;
  }
}

// With the chooser itself deciding (whatever this host's timings make it choose), outputs are
// those without speculation.
TEST(SpeculativeAuto, GreedyIdenticalWithTheChooserDeciding) {
  ModelConfig cfg;
  std::vector<int32_t> eos;
  auto runner = EngineRunner(kBundled, &cfg, &eos);
  ASSERT_TRUE(runner);
  auto base = Make(Options(kBundled, "bf16", 0));
  ASSERT_TRUE(base);
  const auto prompts = ArithPrompts(kSanitized ? 3 : 24);
  const auto want = Generate(*base, prompts, 32, /*batched=*/false);
  SchedulerConfig sc = AutoConfig(cfg, KvCacheDtype::kBf16);
  sc.eos_ids = eos;
  sc.spec_chooser.reprobe_interval = 8;  // probes often
  sc.spec_chooser.probe_steps = 2;
  for (const bool batched : {false, true}) {
    const AutoRun got = RunAuto(*runner, sc, prompts, 32, batched);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got.tokens[i], want[i]) << i;
    int64_t steps = 0;
    for (int64_t c : got.stats.spec.steps_histogram) steps += c;
    EXPECT_GT(steps, 0);
  }
  // The engine's flag: auto is the default with an algorithm and without steps.
  EngineOptions o = Options(kBundled, "bf16", 0);
  o.speculative.algorithm = SpeculativeAlgorithm::kMtp;
  auto e = Make(o);
  ASSERT_TRUE(e);
  const auto via_engine = Generate(*e, prompts, 32, /*batched=*/true);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(via_engine[i], want[i]) << i;
  EXPECT_TRUE(e->Stats().spec.automatic);
  EXPECT_EQ(e->Stats().spec.steps_histogram.size(),
            static_cast<size_t>(kSpeculativeAutoMaxSteps + 1));
}

// Under the script, the MTP layer's rows that a request has (positions < mtp_len, the ones
// written late by a catch-up included) equal those of one fresh prefill over its tokens.
TEST(SpeculativeAuto, CaughtUpMtpRowsAreThoseOfAFreshPrefill) {
  auto model = Model::Load(kBundled);
  ASSERT_TRUE(model.ok());
  const ModelConfig cfg = (*model)->config();
  const KernelTable& kt = SelectKernels();
  auto runner = MakeModelRunner(std::move(*model), kt, 1);
  auto fresh_model = Model::Load(kBundled);
  ASSERT_TRUE(fresh_model.ok());
  ThreadPool pool(1);
  SchedulerConfig sc = AutoConfig(cfg, KvCacheDtype::kF32);
  sc.spec_schedule = Scripted;
  Scheduler sched(sc, *runner, nullptr);
  const auto prompts = ArithPrompts(3);
  std::vector<std::shared_ptr<TokenSink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sinks.push_back(std::make_shared<TokenSink>());
    GenerationRequest r = Greedy(prompts[i], 40);
    r.ignore_eos = true;
    sched.Add(static_cast<RequestId>(i + 1), r, sinks.back(), Clock::now());
  }
  const int64_t W = cfg.mla_cache_values(), L = cfg.num_hidden_layers;
  int64_t compared = 0, lagging = 0;
  while (sched.Step()) {
    for (const auto& v : sched.running_view()) {
      if (static_cast<int64_t>(v.tokens.size()) != v.kv_len + 1 || v.kv_len < 2) continue;
      lagging += v.mtp_len < v.kv_len ? 1 : 0;
      if (v.mtp_len < 2) continue;
      ContiguousKvStore fresh(cfg, v.kv_len + 1);
      const int64_t seq = fresh.AddSequence();
      ForwardBatch fb;
      SequenceInput in;
      in.seq = seq;
      in.tokens.assign(v.tokens.begin(), v.tokens.begin() + v.kv_len);
      in.mtp_next.assign(v.tokens.begin() + 1, v.tokens.begin() + v.kv_len + 1);
      fb.seqs.push_back(in);
      auto out = (*fresh_model)->Forward(fb, ForwardOptions(), fresh, kt, pool);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      std::vector<float> a(W);
      for (int64_t p = 0; p < v.mtp_len; ++p) {
        sched.kv_store().ReadMlaRow(static_cast<int64_t>(v.id), L, p, a.data());
        const float* b = fresh.MlaRow(seq, L, p);
        for (int64_t k = 0; k < W; ++k) {
          ASSERT_LE(std::abs(a[k] - b[k]) / (1.0 + std::abs(b[k])), 1e-4)
              << "MTP layer pos " << p << " of " << v.mtp_len << " value " << k;
        }
      }
      ++compared;
    }
  }
  for (const auto& s : sinks) EXPECT_TRUE(s->finished);
  EXPECT_GT(compared, 20);
  EXPECT_GT(lagging, 0);  // the script's steps without drafts left rows to catch up
}

// Critical value of chi-square with `df` degrees of freedom at p = 0.001 (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.090232, k = static_cast<double>(df);
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

// Pearson's statistic over cells with expected count >= 5 (the rest pooled into one cell).
double ChiSquare(const std::map<int64_t, double>& expected_p, const std::map<int64_t, int>& seen,
                 int n, int* df) {
  double stat = 0, pooled_e = 0, pooled_o = 0;
  int cells = 0;
  for (const auto& [k, p] : expected_p) {
    const double e = p * n;
    const auto it = seen.find(k);
    const double o = it == seen.end() ? 0 : it->second;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++cells;
  }
  for (const auto& [k, o] : seen) {
    if (!expected_p.contains(k)) {
      ADD_FAILURE() << "token " << k << " has probability 0 but was drawn " << o << " times";
    }
  }
  if (pooled_e > 0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  *df = cells - 1;
  return stat;
}

// The rejection sampler on its own: whatever the draft (likely, unlikely, filtered out, the only
// candidate), 40,000 draws follow the filtered target distribution.
TEST(Speculative, RejectionSamplingMatchesTheTargetDistribution) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.5f);
  std::vector<float> logits(64);
  for (float& x : logits) x = g(rng);
  std::vector<SamplingParams> settings(3);
  settings[0].temperature = 1.0f;
  settings[1].temperature = 0.7f;
  settings[1].top_k = 8;
  settings[2].temperature = 1.3f;
  settings[2].top_p = 0.8f;
  settings[2].min_p = 0.02f;
  for (size_t si = 0; si < settings.size(); ++si) {
    SamplingParams sp = settings[si];
    const Sampler::Candidates c = Sampler(sp).Filter(logits);
    std::map<int64_t, double> want;
    for (size_t i = 0; i < c.ids.size(); ++i) want[c.ids[i]] = c.p[i];
    // Drafts: the most likely token, a mid one, the least likely kept, and one filtered out.
    std::vector<int32_t> drafts = {c.ids.front(), c.ids[c.ids.size() / 2], c.ids.back()};
    for (int32_t t = 0; t < 64; ++t) {
      if (!want.contains(t)) {
        drafts.push_back(t);
        break;
      }
    }
    for (int32_t d : drafts) {
      sp.seed = 1000 * si + static_cast<uint64_t>(d);
      Sampler s(sp);
      const int n = 40000;
      std::map<int64_t, int> seen;
      int accepted = 0;
      for (int i = 0; i < n; ++i) {
        const int32_t t = s.SampleSpeculative(logits, d);
        ++seen[t];
        accepted += t == d ? 1 : 0;
      }
      int df = 0;
      const double stat = ChiSquare(want, seen, n, &df);
      ASSERT_GT(df, 0);
      EXPECT_LT(stat, ChiSquareCritical(df)) << "setting " << si << " draft " << d << " df " << df;
      const double p_d = want.contains(d) ? want[d] : 0.0;
      EXPECT_NEAR(static_cast<double>(accepted) / n, p_d,
                  5 * std::sqrt(p_d * (1 - p_d) / n) + 1e-9);
    }
  }
  // A single candidate: the draft is that token or is replaced by it.
  SamplingParams one;
  one.temperature = 1.0f;
  one.top_k = 1;
  Sampler s(one);
  const int32_t top = Argmax(logits);
  EXPECT_EQ(s.SampleSpeculative(logits, top), top);
  EXPECT_EQ(s.SampleSpeculative(logits, (top + 1) % 64), top);
}

// Exact target of the first two sampled tokens: p(t1 | prompt) · p(t2 | prompt, t1) over the
// filtered distributions, keyed t1 · vocab + t2.
std::map<int64_t, double> TargetJoint(const Model& model, const std::vector<int32_t>& prompt,
                                      const SamplingParams& sp) {
  const ModelConfig& cfg = model.config();
  ThreadPool pool(1);
  auto next = [&](const std::vector<int32_t>& toks) {
    ContiguousKvStore kv(cfg, static_cast<int64_t>(toks.size()));
    ForwardBatch fb;
    fb.seqs.push_back({kv.AddSequence(), 0, toks, {}});
    auto out = model.Forward(fb, ForwardOptions(), kv, SelectKernels(), pool);
    EXPECT_TRUE(out.ok());
    return Sampler(sp).Filter(out->logits);
  };
  std::map<int64_t, double> want;
  const Sampler::Candidates c1 = next(prompt);
  for (size_t i = 0; i < c1.ids.size(); ++i) {
    std::vector<int32_t> p2 = prompt;
    p2.push_back(c1.ids[i]);
    const Sampler::Candidates c2 = next(p2);
    for (size_t j = 0; j < c2.ids.size(); ++j) {
      want[int64_t{c1.ids[i]} * cfg.vocab_size + c2.ids[j]] = c1.p[i] * c2.p[j];
    }
  }
  return want;
}

// End to end at temperature 2.5 (top-4, so that several outcomes are likely): the first two
// generated tokens of 20,000 seeded requests, the second one drawn by verifying an MTP draft,
// follow the target joint distribution computed from the model's own logits.
TEST(Speculative, SampledOutputsFollowTheTargetDistribution) {
  EngineOptions o = Options(kBundled, "f32", 2);
  o.max_running_requests = 64;
  auto e = Make(o);
  ASSERT_TRUE(e);
  const std::vector<int32_t> prompt = ArithPrompts(1)[0];
  SamplingParams sp;
  sp.temperature = 2.5f;
  sp.top_k = 4;
  auto model = Model::Load(kBundled);
  ASSERT_TRUE(model.ok());
  const ModelConfig& cfg = (*model)->config();
  const std::map<int64_t, double> want = TargetJoint(**model, prompt, sp);
  const int n = kSanitized ? 500 : 20000;
  std::map<int64_t, int> seen;
  for (int base = 0; base < n; base += 500) {
    std::vector<std::unique_ptr<RequestStream>> streams;
    for (int i = base; i < base + 500; ++i) {
      GenerationRequest r;
      r.prompt = prompt;
      r.max_tokens = 3;  // token 1 from prefill, token 2 verifies the first draft
      r.ignore_eos = true;
      r.sampling = sp;
      r.sampling.seed = static_cast<uint64_t>(i) + 1;
      auto s = e->Submit(r);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      streams.push_back(std::move(*s));
    }
    for (auto& s : streams) {
      StreamResult r = Drain(*s);
      ASSERT_GE(r.tokens.size(), 2u);
      ++seen[int64_t{r.tokens[0]} * cfg.vocab_size + r.tokens[1]];
    }
  }
  int df = 0;
  const double stat = ChiSquare(want, seen, n, &df);
  ASSERT_GT(df, 1);
  EXPECT_LT(stat, ChiSquareCritical(df)) << "df " << df;
  const EngineStats st = e->Stats();
  EXPECT_GT(st.spec.tokens_accepted, n / 20);
  EXPECT_LT(st.spec.tokens_accepted, st.spec.drafts_proposed);
}

// The end-to-end chi-square test under auto with the script: the second token of each request
// is drawn with or without a draft to verify (the script alternates), the distribution is the
// target's either way.
TEST(SpeculativeAuto, SampledOutputsFollowTheTargetDistributionWhileTheDraftsChange) {
  auto model = Model::Load(kBundled);
  ASSERT_TRUE(model.ok());
  const ModelConfig cfg = (*model)->config();
  auto runner = MakeModelRunner(std::move(*model), SelectKernels(), 1);
  const std::vector<int32_t> prompt = ArithPrompts(1)[0];
  SamplingParams sp;
  sp.temperature = 2.5f;
  sp.top_k = 4;
  auto ref = Model::Load(kBundled);
  ASSERT_TRUE(ref.ok());
  const std::map<int64_t, double> want = TargetJoint(**ref, prompt, sp);
  const int n = kSanitized ? 600 : 20000;  // enough samples for the test's bins (df > 1)
  const int per_batch = kSanitized ? 100 : 250;
  std::map<int64_t, int> seen;
  int64_t accepted = 0, proposed = 0;
  for (int base = 0; base < n; base += per_batch) {
    SchedulerConfig sc = AutoConfig(cfg, KvCacheDtype::kF32);
    sc.n_pages = 8192;
    sc.max_running_requests = per_batch / 2;  // two waves: each meets other steps of the script
    const int64_t offset = base / per_batch;
    sc.spec_schedule = [offset](int32_t, int64_t step) {
      return static_cast<int32_t>((step + offset) % 2 == 0 ? 0 : 2);
    };
    std::vector<std::vector<int32_t>> prompts(per_batch, prompt);
    SamplingParams s = sp;
    s.seed = static_cast<uint64_t>(base) * 7919;
    const AutoRun got = RunAuto(*runner, sc, prompts, 3, /*batched=*/true, &s);
    for (const auto& t : got.tokens) {
      ASSERT_GE(t.size(), 2u);
      ++seen[int64_t{t[0]} * cfg.vocab_size + t[1]];
    }
    accepted += got.stats.spec.tokens_accepted;
    proposed += got.stats.spec.drafts_proposed;
  }
  int df = 0;
  const double stat = ChiSquare(want, seen, n, &df);
  ASSERT_GT(df, 1);
  EXPECT_LT(stat, ChiSquareCritical(df)) << "df " << df;
  EXPECT_GT(accepted, n / 40);
  EXPECT_LT(accepted, proposed);
}

TEST(Speculative, UnsupportedCombinationsAreRefusedAtStart) {
  auto refused = [](EngineOptions o, const std::string& needle) {
    auto e = CreateEngine(o);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(needle), std::string::npos) << e.status().message();
  };
  EngineOptions o = Options(kTiny, "bf16", 3);
  o.speculative.eagle_topk = 2;
  refused(o, "topk");
  o = Options(kTiny, "bf16", 3);
  o.speculative.num_draft_tokens = 6;
  refused(o, "num_steps + 1");
  o = Options(kTiny, "bf16", 0);
  o.speculative.num_steps = 2;
  refused(o, "speculative_algorithm");
  // The algorithm's name is parsed at the edge (the CLI); an unknown one is named there.
  auto medusa = ParseSpeculativeAlgorithm("MEDUSA");
  ASSERT_FALSE(medusa.ok());
  EXPECT_NE(medusa.status().message().find("MEDUSA"), std::string::npos);
  o = Options(kTiny, "bf16", 40);
  refused(o, "[1, 16]");
  // auto: the most tokens per verify (num_draft_tokens) must leave room for 1..16 drafts.
  for (int32_t bad : {1, 18}) {
    o = Options(kTiny, "bf16", 0);
    o.speculative.algorithm = SpeculativeAlgorithm::kMtp;
    o.speculative.num_steps.reset();  // auto
    o.speculative.num_draft_tokens = bad;
    refused(o, "[2, 17]");
  }
  o = Options(kTiny, "bf16", 0);
  o.speculative.algorithm = SpeculativeAlgorithm::kMtp;
  o.speculative.num_steps = -7;
  refused(o, "auto or in [1, 16]");
  for (const char* alias : {"EAGLE", "nextn", "MTP"}) {
    auto algo = ParseSpeculativeAlgorithm(alias);
    ASSERT_TRUE(algo.ok()) << alias;
    EXPECT_EQ(*algo, SpeculativeAlgorithm::kMtp) << alias;
  }
  EXPECT_EQ(*ParseSpeculativeAlgorithm(""), SpeculativeAlgorithm::kNone);
  o = Options(kTiny, "bf16", 3);
  o.speculative.num_draft_tokens = 4;
  EXPECT_TRUE(CreateEngine(o).ok());
  // A model without an MTP layer cannot speculate (the fake runner's config says so).
  ModelConfig c = TinyTestConfig();
  c.num_nextn_predict_layers = 0;
  auto e = CreateEngineWithRunner(Options(kTiny, "bf16", 3), std::make_unique<FakeRunner>(c),
                                  std::nullopt, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no MTP layer"), std::string::npos);
}

}  // namespace
}  // namespace mx::speculative_test
