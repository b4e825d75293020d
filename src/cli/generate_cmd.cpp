// `mxserve generate MODEL_DIR --prompt TEXT | --prompt-ids 1,2,3`: offline generation with the
// model's own tokenizer and chat template, streaming text (or ids with --print-ids), ending
// with prefill tok/s, decode tok/s and achieved weight bandwidth beside the machine's measured
// read bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/bandwidth.h"
#include "base/thread_pool.h"
#include "cli/cli_util.h"
#include "cli/verb.h"
#include "engine/model_factory.h"
#include "engine/sampler.h"
#include "kernels/kernels.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weight_bytes.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

struct GenerateArgs {
  std::string model_dir;
  std::string prompt;
  std::string prompt_ids;
  bool chat = false;
  std::string chat_template_kwargs;  // JSON object, with --chat
  bool print_ids = false;
  bool ignore_eos = false;
  int max_tokens = 64;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  uint64_t seed = 0;
  std::string kernels;
  std::string gemm_activations = "fp32";  // exact offline, as its f32 KV default
  std::string kv_cache_dtype = "auto";
  std::string tuned_config_dir;
  bool untuned_moe = false;
};

int RunGenerate(const GenerateArgs& a) {
  if (a.prompt.empty() == a.prompt_ids.empty()) {
    std::fprintf(stderr, "mxserve generate: give exactly one of --prompt or --prompt-ids\n");
    return 2;
  }
  if (!a.chat_template_kwargs.empty() && !a.chat) {
    std::fprintf(stderr, "mxserve generate: --chat-template-kwargs needs --chat\n");
    return 2;
  }
  // Tokenizer: required for text prompts and text output, not read with ids in and out.
  ModelLoadOptions lo;
  lo.model_dir = a.model_dir;
  lo.kernels = a.kernels;
  lo.gemm_activations = a.gemm_activations;
  lo.tuned_config_dir = a.tuned_config_dir;
  lo.untuned_moe = a.untuned_moe;
  lo.tokenizer =
      !a.prompt.empty() || !a.print_ids ? TokenizerLoad::kRequired : TokenizerLoad::kNone;
  auto loaded = LoadModel(lo);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const KernelTable& kt = *loaded->kernels;
  const Model& model = *loaded->model;
  const ModelConfig& cfg = model.config();
  const MoeTuning& moe = loaded->moe;
  std::optional<tok::Tokenizer>& tokenizer = loaded->tokenizer;

  std::vector<int32_t> prompt;
  if (!a.prompt_ids.empty()) {
    auto ids = ParseIdList(a.prompt_ids, cfg.vocab_size, "--prompt-ids");
    if (!ids.ok()) return Fail(ids.status().message());
    prompt = *ids;
  } else {
    std::string text = a.prompt;
    if (a.chat) {
      auto tc = LoadTokenizerChatConfig(a.model_dir);
      if (!tc.ok()) return Fail(tc.status().message());
      if (tc->chat_template.empty()) return Fail(a.model_dir + ": no chat template for --chat");
      auto tmpl = ChatTemplate::Parse(tc->chat_template, "chat_template");
      if (!tmpl.ok()) return Fail(tmpl.status().message());
      ChatRequest req;
      req.messages.push_back({{"role", "user"}, {"content", a.prompt}});
      req.bos_token = tc->bos_token;
      req.eos_token = tc->eos_token;
      if (!a.chat_template_kwargs.empty()) {
        const auto kw = nlohmann::ordered_json::parse(a.chat_template_kwargs, nullptr, false);
        if (kw.is_discarded() || !kw.is_object()) {
          return Fail(
              "--chat-template-kwargs: expected a JSON object, e.g. '{\"enable_thinking\": "
              "false}'");
        }
        for (auto it = kw.begin(); it != kw.end(); ++it) req.kwargs[it.key()] = it.value();
      }
      auto rendered = tmpl->Render(MakeChatContext(req));
      if (!rendered.ok()) return Fail(rendered.status().message());
      text = *rendered;
    }
    prompt = tokenizer->Encode(text);
  }
  if (prompt.empty()) return Fail("the prompt is empty");
  const int64_t total = static_cast<int64_t>(prompt.size()) + a.max_tokens;
  if (total > cfg.max_position_embeddings) {
    return Fail(fmt::format("prompt ({}) + --max-tokens ({}) exceeds the context window ({})",
                            prompt.size(), a.max_tokens, cfg.max_position_embeddings));
  }

  ThreadPool pool(Globals().threads);
  auto kv_or = MakeOfflineKvStore(cfg, a.kv_cache_dtype, total);
  if (!kv_or.ok()) return Fail(kv_or.status().message());
  KvStore& kv = **kv_or;
  const int64_t seq = 0;
  Sampler sampler({.temperature = a.temperature,
                   .top_k = a.top_k,
                   .top_p = a.top_p,
                   .min_p = a.min_p,
                   .seed = a.seed});
  std::optional<tok::StreamingDetokenizer> detok;
  if (!a.print_ids) detok.emplace(*tokenizer, /*skip_special_tokens=*/false);

  ForwardOptions opts;
  opts.logits = LogitsMode::kLast;
  ForwardBatch batch;
  batch.seqs.push_back({seq, 0, prompt, {}});
  opts.moe = moe.For(batch);
  auto t0 = std::chrono::steady_clock::now();
  auto out = model.Forward(batch, opts, kv, kt, pool);
  if (!out.ok()) return Fail(out.status().message());
  auto t1 = std::chrono::steady_clock::now();
  const int64_t V = cfg.vocab_size;

  std::vector<int32_t> generated;
  int64_t pos = static_cast<int64_t>(prompt.size());
  int32_t next = sampler.Sample(std::span<const float>(out->logits.data(), V));
  auto is_eos = [&](int32_t id) {
    return std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), id) !=
           cfg.eos_token_ids.end();
  };
  std::string finish = "length";
  opts.want_router = true;  // decode steps: which routed experts each step reads
  opts.moe = moe.For(1);
  double decode_bytes = 0;  // Σ StepWeightBytes over the decode steps
  while (true) {
    generated.push_back(next);
    if (detok) {
      std::string piece = detok->Push(next);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    if (!a.ignore_eos && is_eos(next)) {
      finish = "stop";
      break;
    }
    if (static_cast<int>(generated.size()) >= a.max_tokens) break;
    ForwardBatch step;
    step.seqs.push_back({seq, pos, {next}, {}});
    auto o = model.Forward(step, opts, kv, kt, pool);
    if (!o.ok()) return Fail(o.status().message());
    decode_bytes += StepWeightBytes(model.weights(), o->router);
    ++pos;
    next = sampler.Sample(std::span<const float>(o->logits.data(), V));
  }
  auto t2 = std::chrono::steady_clock::now();
  if (detok) {
    std::string tail = detok->Finish();
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::printf("\n");
  } else {
    std::string line;
    for (size_t i = 0; i < generated.size(); ++i)
      line += (i ? "," : "") + std::to_string(generated[i]);
    std::printf("%s\n", line.c_str());
  }

  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  const int64_t decode_steps = static_cast<int64_t>(generated.size()) - 1;
  // Weights read per decode token, in their stored formats (model/weight_bytes.h).
  const double bytes_per_token = decode_steps > 0 ? decode_bytes / decode_steps : 0.0;
  // The probe reads twice what a token reads (at least 256 MB, at most StreamBytes()): a model
  // whose step fits the caches is compared with a cache-sized read, a bigger one with memory,
  // and a small model's run does not wait for a multi-GB probe.
  const int64_t probe =
      std::clamp(static_cast<int64_t>(2 * bytes_per_token), int64_t{256} << 20, StreamBytes());
  const double bw = MeasureReadBandwidthGBps(pool, static_cast<size_t>(probe), 2);
  const double decode_tps = decode_steps > 0 ? decode_steps / decode_s : 0.0;
  const double achieved = decode_tps * bytes_per_token / 1e9;
  std::fprintf(stderr,
               "\n[generate] kernels %s (%s GEMM activations), %d threads, MoE config %s; prompt "
               "%zu tokens, generated %zu "
               "(%s)\n"
               "[generate] prefill %.1f tok/s (%.3f s); decode %.1f tok/s (%.3f s)\n"
               "[generate] weights read per decode token %.2f MB; achieved %.2f GB/s of %.2f GB/s "
               "measured read bandwidth (%.1f%%)\n",
               KernelLevelName(kt.level), GemmActivationsName(kt.bf16_activations), pool.size(),
               moe.tuned ? moe.file.c_str() : "default (untuned)", prompt.size(), generated.size(),
               finish.c_str(), prompt.size() / prefill_s, prefill_s, decode_tps, decode_s,
               bytes_per_token / 1e6, achieved, bw, bw > 0 ? 100.0 * achieved / bw : 0.0);
  return 0;
}

VerbRun SetupGenerate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "Offline generation; prints tok/s and GB/s");
  sub->add_option("model_dir", a->model_dir, "Hugging Face checkpoint directory")->required();
  sub->add_option("--prompt", a->prompt, "prompt text");
  sub->add_option("--prompt-ids", a->prompt_ids, "prompt as comma-separated token ids");
  sub->add_flag("--chat", a->chat, "wrap the prompt in the model's chat template");
  sub->add_option("--chat-template-kwargs", a->chat_template_kwargs,
                  "with --chat: extra template variables as a JSON object, e.g. "
                  "'{\"enable_thinking\": false}'");
  sub->add_flag("--print-ids", a->print_ids, "print generated ids instead of text");
  sub->add_flag("--ignore-eos", a->ignore_eos, "do not stop at EOS ids");
  sub->add_option("--max-tokens", a->max_tokens, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--temperature", a->temperature, "0 = greedy")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  sub->add_option("--top-p", a->top_p)->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  sub->add_option("--top-k", a->top_k)->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--min-p", a->min_p)->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  sub->add_option("--seed", a->seed)->capture_default_str();
  AddKernelFlags(sub, &a->kernels, &a->gemm_activations);
  sub->add_option("--kv-cache-dtype", a->kv_cache_dtype,
                  "auto (= f32, exact) | bf16 | fp8_e4m3 | fp8_e4m3fnuz")
      ->capture_default_str();
  sub->add_option("--tuned-config-dir", a->tuned_config_dir,
                  "tuned MoE kernel configs, searched after the shipped configs/moe/");
  sub->add_flag("--untuned-moe", a->untuned_moe,
                "run the MoE on its untuned default config (for before/after comparisons)");
  return [a]() -> int { return RunGenerate(*a); };
}

MX_REGISTER_VERB(generate, "generate", 20, SetupGenerate);

}  // namespace
}  // namespace mx::cli
