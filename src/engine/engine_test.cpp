// The Engine on the tiny test checkpoint: greedy output pinned to a plain Model::Forward loop
// (f32 KV), and token-identical alone, in a batch with 16 random others, under any chunk size,
// with and without a prefix-cache hit and after retraction (bf16 KV); fp8 KV within a stated
// tolerance of bf16; seeds, stop strings / token ids / EOS, min/max tokens, logprobs, abort,
// overload and argument errors.
#include "engine/engine.h"
#include "kv/paged_kv_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "base/thread_pool.h"
#include "engine/engine_factory.h"
#include "engine/engine_test_util.h"
#include "io/generation_config.h"
#include "io/safetensors_writer.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mx::engine_test {
namespace {

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

EngineOptions TinyOptions() {
  EngineOptions o;
  o.model.model_dir = kTiny;
  o.threads = 1;
  o.page_size = 4;
  o.max_total_tokens = 4096;
  o.chunked_prefill_size = 64;
  return o;
}

std::unique_ptr<Engine> Make(const EngineOptions& o) {
  auto e = CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<int32_t> RandomPrompt(std::mt19937& rng, int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng() % 300));
  return p;
}

StreamResult RunOne(Engine& e, GenerationRequest r) {
  auto s = e.Submit(std::move(r));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  StreamResult out = Drain(**s);
  EXPECT_FALSE(out.timed_out);
  EXPECT_TRUE(out.last.error.ok()) << out.last.error.ToString();
  return out;
}

// Greedy continuation with Model::Forward and a ContiguousKvStore (fp32 rows), one sequence.
std::vector<int32_t> ReferenceGreedy(const std::vector<int32_t>& prompt, int n) {
  static std::unique_ptr<Model> model = std::move(Model::Load(kTiny)).value();
  ThreadPool pool(1);
  ContiguousKvStore kv(model->config(), static_cast<int64_t>(prompt.size()) + n);
  const int64_t seq = kv.AddSequence();
  std::vector<int32_t> out;
  std::vector<int32_t> next = prompt;
  int64_t pos = 0;
  for (int i = 0; i < n; ++i) {
    ForwardBatch b;
    b.seqs.push_back({seq, pos, next, {}});
    auto o = model->Forward(b, ForwardOptions(), kv, SelectKernels(), pool);
    EXPECT_TRUE(o.ok());
    pos += static_cast<int64_t>(next.size());
    out.push_back(Argmax(o->logits));
    next = {out.back()};
  }
  return out;
}

TEST(Engine, GreedyMatchesAPlainForwardLoop) {
  EngineOptions o = TinyOptions();
  o.kv_cache_dtype = KvCacheDtype::kF32;
  auto e = Make(o);
  std::mt19937 rng(1);
  for (int len : {1, 5, 23}) {
    const auto p = RandomPrompt(rng, len);
    EXPECT_EQ(RunOne(*e, Greedy(p, 12)).tokens, ReferenceGreedy(p, 12)) << "prompt length " << len;
  }
}

TEST(Engine, GreedyIsTheSameAloneBatchedChunkedCachedAndRetracted) {
  std::mt19937 rng(2);
  const auto target = RandomPrompt(rng, 37);
  constexpr int kOut = 16;
  std::vector<int32_t> alone;
  {
    EngineOptions o = TinyOptions();
    o.disable_radix_cache = true;
    alone = RunOne(*Make(o), Greedy(target, kOut)).tokens;
    ASSERT_EQ(alone.size(), static_cast<size_t>(kOut));
  }
  // In a batch with 16 random others, for several chunk sizes, with the cache on and off.
  for (int64_t chunk : {1, 3, 8, 64}) {
    for (bool radix : {false, true}) {
      EngineOptions o = TinyOptions();
      o.chunked_prefill_size = chunk;
      o.disable_radix_cache = !radix;
      auto e = Make(o);
      std::vector<std::unique_ptr<RequestStream>> others;
      for (int i = 0; i < 16; ++i) {
        auto p = RandomPrompt(rng, 1 + static_cast<int>(rng() % 40));
        if (i % 4 == 0) p.insert(p.begin(), target.begin(), target.begin() + 20);  // shared prefix
        others.push_back(e->Submit(Greedy(p, 1 + static_cast<int32_t>(rng() % 20))).value());
      }
      EXPECT_EQ(RunOne(*e, Greedy(target, kOut)).tokens, alone) << "chunk " << chunk;
      for (auto& s : others) EXPECT_FALSE(Drain(*s).timed_out);
      if (radix) {  // a second time: served from the prefix cache
        StreamResult again = RunOne(*e, Greedy(target, kOut));
        EXPECT_EQ(again.tokens, alone) << "cache hit, chunk " << chunk;
        EXPECT_EQ(again.last.cached_tokens, 36);  // page-aligned, all but the last token
        EXPECT_GT(e->Stats().counters.radix_hit_tokens, 0);
      }
    }
  }
  // After retraction: a pool too small for everyone's outputs.
  EngineOptions o = TinyOptions();
  o.max_total_tokens = 160;
  auto e = Make(o);
  std::vector<std::unique_ptr<RequestStream>> others;
  for (int i = 0; i < 6; ++i) {
    others.push_back(e->Submit(Greedy(RandomPrompt(rng, 10), 60)).value());
  }
  EXPECT_EQ(RunOne(*e, Greedy(target, kOut)).tokens, alone) << "with retractions";
  for (auto& s : others) EXPECT_EQ(Drain(*s).tokens.size(), 60u);
  EXPECT_GT(e->Stats().counters.retractions, 0);
}

// The logprob bf16 KV gives its own greedy token after `prompt`, and the logprob the other
// engine gives that same token (from its top-20; -inf when absent).
std::pair<double, double> FirstTokenLogprobs(Engine& ref, Engine& other,
                                             const std::vector<int32_t>& prompt) {
  GenerationRequest r = Greedy(prompt, 1);
  r.top_logprobs = 20;
  const StreamResult a = RunOne(ref, r), b = RunOne(other, r);
  double lb = -std::numeric_limits<double>::infinity();
  for (const auto& t : b.top[0]) {
    if (t.token == a.tokens[0]) lb = t.logprob;
  }
  return {a.logprobs[0].logprob, lb};
}

// KV scales in the checkpoint reach the fp8 KV store: at 1e-6 every cached value saturates
// (fp8 max 448 → ±4.5e-4) and the greedy tokens change; bf16 KV ignores them.
TEST(Engine, KvScalesFromTheCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "engine_kv_scales";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json"}) {
    fs::copy_file(fs::path(kTiny) / f, dir / f);
  }
  // Two files without an index (model.safetensors alone would hide the second).
  fs::copy_file(fs::path(kTiny) / "model.safetensors", dir / "model-1.safetensors");
  SafetensorsWriter w;
  const float scale = 1e-6f;
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &scale, 4);
  for (int64_t l = 0; l <= TinyTestConfig().num_hidden_layers; ++l) {
    ASSERT_TRUE(
        w.Add(fmt::format("model.layers.{}.self_attn.k_scale", l), DType::kF32, {}, bytes).ok());
  }
  ASSERT_TRUE(w.WriteFile((dir / "model-2.safetensors").string()).ok());
  std::mt19937 rng(9);
  const GenerationRequest req = Greedy(RandomPrompt(rng, 12), 12);
  auto run = [&](const std::string& model, KvCacheDtype kv) {
    EngineOptions o = TinyOptions();
    o.model.model_dir = model;
    o.kv_cache_dtype = kv;
    return RunOne(*Make(o), req).tokens;
  };
  EXPECT_EQ(run(dir.string(), KvCacheDtype::kBf16), run(kTiny, KvCacheDtype::kBf16));
  EXPECT_NE(run(dir.string(), KvCacheDtype::kFp8E4M3Fn), run(kTiny, KvCacheDtype::kFp8E4M3Fn));
}

TEST(Engine, Fp8KvStaysCloseToBf16) {
  // Tolerance (random tiny weights, per-layer scale 1.0): over 24 prompts, the logprob of the
  // bf16 greedy next token moves by at most 0.15 nats with fp8 e4m3 KV (measured: max 0.07,
  // mean 0.02) and by at most 0.01 with f32 KV (measured 0.0025).
  // The GEMMs take exact activations here: bf16 rounding of activations moves a logprob by
  // ~0.01 wherever a small KV difference straddles a rounding boundary, which would hide the
  // KV dtype's own effect that this test bounds.
  std::mt19937 rng(3);
  EngineOptions o = TinyOptions();
  o.model.gemm_activations = GemmActivations::kFp32;
  auto bf16 = Make(o);
  o.kv_cache_dtype = KvCacheDtype::kFp8E4M3Fn;
  auto fp8 = Make(o);
  o.kv_cache_dtype = KvCacheDtype::kF32;
  auto f32 = Make(o);
  double worst8 = 0, worst32 = 0, sum8 = 0;
  constexpr int kPrompts = 24;
  for (int i = 0; i < kPrompts; ++i) {
    // Prompts within index_topk (4): the DSA selection is every position, so no top-k set
    // flips under rounding (beyond it, with random weights, any rounding, bf16 vs f32 included,
    // flips selections and moves logprobs by ~1 nat).
    const auto p = RandomPrompt(rng, 1 + static_cast<int>(rng() % 4));
    auto [a, b] = FirstTokenLogprobs(*bf16, *fp8, p);
    worst8 = std::max(worst8, std::abs(a - b));
    sum8 += std::abs(a - b);
    auto [c, d] = FirstTokenLogprobs(*bf16, *f32, p);
    worst32 = std::max(worst32, std::abs(c - d));
  }
  std::printf("next-token logprob |bf16 - fp8| max %.4f mean %.4f; |bf16 - f32| max %.4f\n", worst8,
              sum8 / kPrompts, worst32);
  EXPECT_LE(worst8, 0.15);
  EXPECT_LE(worst32, 0.01);
}

TEST(Engine, SameSeedSameTokensWhateverIsBatched) {
  std::mt19937 rng(4);
  GenerationRequest r = Greedy(RandomPrompt(rng, 12), 20);
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = 77;
  auto e = Make(TinyOptions());
  const auto alone = RunOne(*e, r).tokens;
  std::vector<std::unique_ptr<RequestStream>> others;
  for (int i = 0; i < 8; ++i) {
    GenerationRequest x = Greedy(RandomPrompt(rng, 9), 20);
    x.sampling.temperature = 1.0f;
    x.sampling.seed = 1000 + i;
    others.push_back(e->Submit(x).value());
  }
  EXPECT_EQ(RunOne(*e, r).tokens, alone);
  for (auto& s : others) Drain(*s);
  r.sampling.seed = 78;
  EXPECT_NE(RunOne(*e, r).tokens, alone);
}

TEST(Engine, StopStringsAcrossTokenBoundariesAndStopTokens) {
  auto tk = tok::Tokenizer::FromFile(kTiny + "/tokenizer.json");
  ASSERT_TRUE(tk.ok());
  auto e = Make(TinyOptions());
  const std::vector<int32_t> prompt = tk->Encode("The licenses for most software");
  const auto full = RunOne(*e, Greedy(prompt, 24)).tokens;
  // A stop string made of the last byte of output token i and the first byte of token i+1.
  int i = -1;
  std::string a, b;
  for (int k = 2; k + 1 < static_cast<int>(full.size()); ++k) {
    a = tk->Decode(std::vector<int32_t>{full[k]});
    b = tk->Decode(std::vector<int32_t>{full[k + 1]});
    if (!a.empty() && !b.empty() && static_cast<unsigned char>(a.back()) < 0x80 &&
        static_cast<unsigned char>(b[0]) < 0x80) {
      i = k;
      break;
    }
  }
  ASSERT_GE(i, 0) << "no ASCII token boundary in " << tk->Decode(full);
  const std::string stop = std::string(1, a.back()) + b[0];
  const std::string text = tk->Decode(full);
  const size_t at = text.find(stop);
  GenerationRequest r = Greedy(prompt, 24);
  r.stop = {stop, "never-appears"};
  const StreamResult s = RunOne(*e, r);
  EXPECT_EQ(s.last.finish, FinishReason::kStop);
  EXPECT_EQ(s.last.matched_stop, stop);
  const std::string got = tk->Decode(s.tokens);
  ASSERT_GE(got.size(), static_cast<size_t>(s.last.stop_trim_bytes));
  EXPECT_EQ(got.substr(0, got.size() - s.last.stop_trim_bytes), text.substr(0, at));
  // The engine's own text (decoded once, sent with the chunks) trims the same way.
  ASSERT_GE(s.text.size(), static_cast<size_t>(s.last.stop_trim_bytes));
  EXPECT_EQ(s.text.substr(0, s.text.size() - s.last.stop_trim_bytes), text.substr(0, at));
  // Without a stop, the text is the whole output decoded.
  EXPECT_EQ(RunOne(*e, Greedy(prompt, 24)).text, text);

  GenerationRequest t = Greedy(prompt, 24);
  t.stop_token_ids = {full[5]};
  const StreamResult st = RunOne(*e, t);
  EXPECT_EQ(st.last.finish, FinishReason::kStop);
  EXPECT_EQ(st.last.matched_stop_token, full[5]);
  EXPECT_EQ(st.tokens.back(), full[5]);
  // The stop token is not shown: the text is the tokens before it.
  EXPECT_EQ(st.text, tk->Decode(std::vector<int32_t>(st.tokens.begin(), st.tokens.end() - 1)));
  EXPECT_LE(st.tokens.size(), 6u);
  // min_tokens: the stop token is masked until then, so the output differs but is long enough.
  t.min_tokens = 10;
  const StreamResult mt = RunOne(*e, t);
  EXPECT_GE(mt.tokens.size(), 10u);
  for (size_t k = 0; k < std::min<size_t>(mt.tokens.size(), 9); ++k)
    EXPECT_NE(mt.tokens[k], full[5]);
}

TEST(Engine, EosIdsComeFromConfigAndGenerationConfig) {
  auto cfg = LoadModelConfig(kTiny + "/config.json");
  ASSERT_TRUE(cfg.ok());
  auto ids = LoadEosTokenIds(kTiny, *cfg);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{300, 307, 309}));
  // A model that always predicts an EOS id stops at once unless ignore_eos.
  auto e = Make(TinyOptions());
  GenerationRequest r = Greedy({1, 2, 3}, 8);
  r.stop_token_ids = {};
  r.ignore_eos = true;
  EXPECT_EQ(RunOne(*e, r).tokens.size(), 8u);
  EXPECT_EQ(RunOne(*e, r).last.finish, FinishReason::kLength);
}

TEST(Engine, LogprobsAndTimings) {
  auto e = Make(TinyOptions());
  GenerationRequest r = Greedy({5, 6, 7, 8}, 6);
  r.top_logprobs = 3;
  const StreamResult s = RunOne(*e, r);
  ASSERT_EQ(s.logprobs.size(), 6u);
  ASSERT_EQ(s.top.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(s.logprobs[i].token, s.tokens[i]);
    ASSERT_EQ(s.top[i].size(), 3u);
    EXPECT_EQ(s.top[i][0].token, s.tokens[i]);  // greedy: the sampled token is the top one
    EXPECT_FLOAT_EQ(s.top[i][0].logprob, s.logprobs[i].logprob);
    EXPECT_GE(s.top[i][0].logprob, s.top[i][1].logprob);
    EXPECT_LE(s.logprobs[i].logprob, 0.0f);
  }
  EXPECT_EQ(s.last.finish, FinishReason::kLength);
  EXPECT_EQ(s.last.prompt_tokens, 4);
  EXPECT_EQ(s.last.completion_tokens, 6);
  EXPECT_GT(s.last.ttft_seconds, 0);
  EXPECT_GE(s.last.e2e_seconds, s.last.ttft_seconds);
  EXPECT_GE(s.last.ttft_seconds, s.last.queue_seconds);
}

TEST(Engine, AbortQueuedAndRunningReleasesPages) {
  EngineOptions o = TinyOptions();
  o.max_running_requests = 1;
  o.disable_radix_cache = true;
  auto e = Make(o);
  auto running = e->Submit(Greedy({1, 2, 3}, 400)).value();
  auto queued = e->Submit(Greedy({4, 5, 6}, 10)).value();
  e->Abort(queued->id());
  e->Abort(running->id());
  e->Abort(987654);  // unknown: ignored
  EXPECT_EQ(Drain(*running).last.finish, FinishReason::kAbort);
  StreamResult q = Drain(*queued);
  EXPECT_EQ(q.last.finish, FinishReason::kAbort);
  EXPECT_TRUE(q.tokens.empty());
  EXPECT_EQ(running->Next(std::chrono::milliseconds(1))->finish, FinishReason::kAbort);  // sticky
  WaitFor(
      [&] {
        const EngineStats s = e->Stats();
        return s.gauges.kv_pages_used == 0 && s.counters.requests_aborted == 2;
      },
      kWaitTimeout, "both aborted requests' pages released");
  const EngineStats st = e->Stats();
  EXPECT_EQ(st.gauges.kv_pages_used, 0);
  EXPECT_EQ(st.counters.requests_aborted, 2);
}

TEST(Engine, OverloadAndBadRequestsAreStatuses) {
  EngineOptions o = TinyOptions();
  o.max_queued_requests = 2;
  o.max_running_requests = 1;
  auto e = Make(o);
  std::vector<std::unique_ptr<RequestStream>> keep;
  StatusCode last = StatusCode::kOk;
  for (int i = 0; i < 50 && last == StatusCode::kOk; ++i) {
    auto s = e->Submit(Greedy({1, 2, 3}, 300));
    if (s.ok()) {
      keep.push_back(std::move(*s));
    } else {
      last = s.status().code();
    }
  }
  EXPECT_EQ(last, StatusCode::kResourceExhausted);
  EXPECT_GE(e->Stats().counters.requests_rejected, 1);
  EXPECT_EQ(e->Submit(Greedy({}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Submit(Greedy({1, 320}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Submit(Greedy({1}, 600)).status().code(), StatusCode::kInvalidArgument);
  GenerationRequest too_many = Greedy({1}, 4);
  too_many.top_logprobs = kMaxTopLogprobs + 1;  // the server's limit too (request_parse.h)
  EXPECT_EQ(e->Submit(std::move(too_many)).status().code(), StatusCode::kInvalidArgument);
  e->Shutdown(std::chrono::milliseconds(0));
  for (auto& s : keep) EXPECT_EQ(Drain(*s).last.finish, FinishReason::kAbort);
  EXPECT_EQ(e->Submit(Greedy({1}, 4)).status().code(), StatusCode::kUnavailable);
  // Option strings are parsed at the edge (the CLI), and an unknown one is named.
  EXPECT_EQ(ParseKvCacheDtype("int3").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ParseKvCacheDtype("int3").status().message().find("'int3'"), std::string::npos);
  EXPECT_EQ(ParseSchedulePolicy("random").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ParseSchedulePolicy("random").status().message().find("'random'"), std::string::npos);
  EXPECT_EQ(*ParseSchedulePolicy("lpm"), SchedulePolicy::kLpm);
  EngineOptions bad = TinyOptions();
  bad.page_size = 0;
  EXPECT_EQ(CreateEngine(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mx::engine_test
