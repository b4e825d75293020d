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
  bool special = false;  // print special tokens (<|endoftext|>, ...) in the text
  bool ignore_eos = false;
  int max_tokens = 64;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  uint64_t seed = 0;
  std::optional<KernelLevel> kernels;  // nullopt: this CPU's best
  GemmActivations gemm_activations =
      GemmActivations::kFp32;  // exact offline, as its f32 KV default
  std::string kv_cache_dtype = "auto";
  std::string tuned_config_dir;
  bool untuned_moe = false;
};

// The prompt as --chat renders it (the model's chat template with --chat-template-kwargs).
Result<std::string> RenderChatPrompt(const GenerateArgs& a) {
  MX_ASSIGN_OR_RETURN(std::optional<ChatFormat> format, LoadChatFormat(a.model_dir));
  if (!format) return InvalidArgument("{}: no chat template for --chat", a.model_dir);
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (!a.chat_template_kwargs.empty()) {
    kwargs = nlohmann::ordered_json::parse(a.chat_template_kwargs, nullptr, false);
    if (kwargs.is_discarded() || !kwargs.is_object()) {
      return InvalidArgument(
          "--chat-template-kwargs: expected a JSON object, e.g. '{{\"enable_thinking\": false}}'");
    }
  }
  return format->RenderUser(a.prompt, std::move(kwargs));
}

// The prompt ids: --prompt-ids as given, or --prompt (rendered with --chat) tokenized.
Result<std::vector<int32_t>> PromptIds(const GenerateArgs& a, const ModelConfig& cfg,
                                       const std::optional<tok::Tokenizer>& tokenizer) {
  if (!a.prompt_ids.empty()) return ParseIdList(a.prompt_ids, cfg.vocab_size, "--prompt-ids");
  std::string text = a.prompt;
  if (a.chat) {
    MX_ASSIGN_OR_RETURN(text, RenderChatPrompt(a));
  }
  return tokenizer->Encode(text);
}

struct Generation {
  std::vector<int32_t> generated;
  std::string finish = "length";
  double prefill_s = 0, decode_s = 0;
  double decode_bytes = 0;  // Σ StepWeightBytes over the decode steps
};

// Prefill, then one token per step until EOS (unless --ignore-eos) or --max-tokens; each token's
// text goes to stdout as it comes (special tokens only with --special), or, with --print-ids,
// the ids at the end.
Result<Generation> Generate(const GenerateArgs& a, const LoadedModel& m,
                            const std::vector<int32_t>& prompt, KvStore& kv, ThreadPool& pool) {
  const KernelTable& kt = *m.kernels;
  const Model& model = *m.model;
  const ModelConfig& cfg = model.config();
  const int64_t seq = 0, V = cfg.vocab_size;
  Sampler sampler({.temperature = a.temperature,
                   .top_k = a.top_k,
                   .top_p = a.top_p,
                   .min_p = a.min_p,
                   .seed = a.seed});
  std::optional<tok::StreamingDetokenizer> detok;
  if (!a.print_ids) detok.emplace(*m.tokenizer, /*skip_special_tokens=*/!a.special);
  auto is_eos = [&](int32_t id) {
    return std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), id) !=
           cfg.eos_token_ids.end();
  };

  Generation g;
  ForwardOptions opts;
  opts.logits = LogitsMode::kLast;
  ForwardBatch batch;
  batch.seqs.push_back({seq, 0, prompt, {}});
  opts.moe = m.moe.For(batch);
  const auto t0 = std::chrono::steady_clock::now();
  MX_ASSIGN_OR_RETURN(ForwardOutput out, model.Forward(batch, opts, kv, kt, pool));
  const auto t1 = std::chrono::steady_clock::now();
  int64_t pos = static_cast<int64_t>(prompt.size());
  int32_t next = sampler.Sample(std::span<const float>(out.logits.data(), V));
  opts.want_router = true;  // decode steps: which routed experts each step reads
  opts.moe = m.moe.For(1);
  while (true) {
    g.generated.push_back(next);
    if (detok) {
      std::string piece = detok->Push(next);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    if (!a.ignore_eos && is_eos(next)) {
      g.finish = "stop";
      break;
    }
    if (static_cast<int>(g.generated.size()) >= a.max_tokens) break;
    ForwardBatch step;
    step.seqs.push_back({seq, pos, {next}, {}});
    MX_ASSIGN_OR_RETURN(ForwardOutput o, model.Forward(step, opts, kv, kt, pool));
    g.decode_bytes += StepWeightBytes(model.weights(), o.router);
    ++pos;
    next = sampler.Sample(std::span<const float>(o.logits.data(), V));
  }
  const auto t2 = std::chrono::steady_clock::now();
  if (detok) {
    std::string tail = detok->Finish();
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::printf("\n");
  } else {
    std::string line;
    for (size_t i = 0; i < g.generated.size(); ++i)
      line += (i ? "," : "") + std::to_string(g.generated[i]);
    std::printf("%s\n", line.c_str());
  }
  g.prefill_s = std::chrono::duration<double>(t1 - t0).count();
  g.decode_s = std::chrono::duration<double>(t2 - t1).count();
  return g;
}

// The run's own measurement on stderr: tok/s and achieved GB/s against the read bandwidth.
void PrintGenerateReport(const LoadedModel& m, ThreadPool& pool, size_t prompt_len,
                         const Generation& g) {
  const KernelTable& kt = *m.kernels;
  const int64_t decode_steps = static_cast<int64_t>(g.generated.size()) - 1;
  // Weights read per decode token, in their stored formats (model/weight_bytes.h).
  const double bytes_per_token = decode_steps > 0 ? g.decode_bytes / decode_steps : 0.0;
  // The probe reads twice what a token reads (at least 256 MB, at most StreamBytes()): a model
  // whose step fits the caches is compared with a cache-sized read, a bigger one with memory,
  // and a small model's run does not wait for a multi-GB probe.
  const int64_t probe =
      std::clamp(static_cast<int64_t>(2 * bytes_per_token), int64_t{256} << 20, StreamBytes());
  const double bw = MeasureReadBandwidthGBps(pool, static_cast<size_t>(probe), 2);
  const double decode_tps = decode_steps > 0 ? decode_steps / g.decode_s : 0.0;
  const double achieved = decode_tps * bytes_per_token / 1e9;
  std::fprintf(stderr,
               "\n[generate] kernels %s (%s GEMM activations), %d threads, MoE config %s; prompt "
               "%zu tokens, generated %zu "
               "(%s)\n"
               "[generate] prefill %.1f tok/s (%.3f s); decode %.1f tok/s (%.3f s)\n"
               "[generate] weights read per decode token %.2f MB; achieved %.2f GB/s of %.2f GB/s "
               "measured read bandwidth (%.1f%%)\n",
               KernelLevelName(kt.level), GemmActivationsName(kt.bf16_activations), pool.size(),
               m.moe.tuned ? m.moe.file.c_str() : "default (untuned)", prompt_len,
               g.generated.size(), g.finish.c_str(), prompt_len / g.prefill_s, g.prefill_s,
               decode_tps, g.decode_s, bytes_per_token / 1e6, achieved, bw,
               bw > 0 ? 100.0 * achieved / bw : 0.0);
}

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
  const ModelConfig& cfg = loaded->model->config();
  auto prompt = PromptIds(a, cfg, loaded->tokenizer);
  if (!prompt.ok()) return Fail(prompt.status().message());
  if (prompt->empty()) return Fail("the prompt is empty");
  const int64_t total = static_cast<int64_t>(prompt->size()) + a.max_tokens;
  if (total > cfg.max_position_embeddings) {
    return Fail(fmt::format("prompt ({}) + --max-tokens ({}) exceeds the context window ({})",
                            prompt->size(), a.max_tokens, cfg.max_position_embeddings));
  }
  ThreadPool pool(Globals().threads);
  auto kv = MakeOfflineKvStore(cfg, a.kv_cache_dtype, total);
  if (!kv.ok()) return Fail(kv.status().message());
  auto g = Generate(a, *loaded, *prompt, **kv, pool);
  if (!g.ok()) return Fail(g.status().message());
  PrintGenerateReport(*loaded, pool, prompt->size(), *g);
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
  sub->add_flag("--special", a->special,
                "print special tokens such as <|endoftext|> (skipped by default)");
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
