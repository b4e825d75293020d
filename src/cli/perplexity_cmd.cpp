// `mxserve perplexity MODEL_DIR --text FILE [--ctx N --stride S] [--kl-base BASE_DIR]`:
// perplexity over a text file with a sliding window (each window is a fresh causal prefill of
// at most ctx tokens; a window after the first scores only the tokens the previous windows did
// not), printing the running value, then the final PPL with its standard error (delta
// method: SE(PPL) = PPL * SE(mean NLL)). With --kl-base, the same windows also run through a
// second checkpoint (e.g. the bf16 original of a quantized model) and the mean KL divergence
// KL(base || model) and top-1 agreement of the next-token distributions are reported.
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/thread_pool.h"
#include "cli/cli_util.h"
#include "cli/verb.h"
#include "engine/model_factory.h"
#include "engine/sampler.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

struct PerplexityArgs {
  std::string model_dir;
  std::string text;
  std::string kl_base;
  bool report = false;  // quant-report: the base-vs-quantized table
  double max_kld = 0.02, min_top1 = 97.0;
  int64_t ctx = 512;
  int64_t stride = 0;                  // 0 = ctx / 2
  std::optional<KernelLevel> kernels;  // nullopt: this CPU's best
  GemmActivations gemm_activations =
      GemmActivations::kFp32;  // exact offline, as its f32 KV default
  std::string kv_cache_dtype = "auto";
  bool json = false;
  bool parse_special = false;  // special-token text (e.g. "<|user|>") becomes the special ids
};

// log-softmax of one row, in double.
void LogSoftmax(const float* logits, int64_t V, std::vector<double>& out) {
  out.resize(V);
  double m = logits[0];
  for (int64_t i = 1; i < V; ++i) m = std::max(m, static_cast<double>(logits[i]));
  double s = 0;
  for (int64_t i = 0; i < V; ++i) s += std::exp(logits[i] - m);
  const double lse = m + std::log(s);
  for (int64_t i = 0; i < V; ++i) out[i] = logits[i] - lse;
}

Result<std::vector<float>> WindowLogits(const Model& model, const std::vector<int32_t>& ids,
                                        const std::string& kv_dtype, const KernelTable& kt,
                                        ThreadPool& pool) {
  ForwardOptions opts;
  opts.logits = LogitsMode::kAll;
  ForwardBatch b;
  b.seqs.push_back({0, 0, ids, {}});
  MX_ASSIGN_OR_RETURN(
      auto kv, MakeOfflineKvStore(model.config(), kv_dtype, static_cast<int64_t>(ids.size())));
  MX_ASSIGN_OR_RETURN(ForwardOutput out, model.Forward(b, opts, *kv, kt, pool));
  return std::move(out.logits);
}

int RunPerplexity(const PerplexityArgs& a) {
  ModelLoadOptions lo;
  lo.model_dir = a.model_dir;
  lo.kernels = a.kernels;
  lo.gemm_activations = a.gemm_activations;
  lo.untuned_moe = true;  // the reference numerics: the default MoE kernel config
  lo.tokenizer = TokenizerLoad::kRequired;
  auto loaded = LoadModel(lo);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const Model& model = *loaded->model;
  const KernelTable& kt = *loaded->kernels;
  const tok::Tokenizer& tokenizer = *loaded->tokenizer;
  const ModelConfig& c = model.config();
  std::unique_ptr<Model> base;
  if (!a.kl_base.empty()) {
    auto b = Model::Load(a.kl_base);
    if (!b.ok()) return Fail(b.status().message());
    if (b->get()->config().vocab_size != c.vocab_size) {
      return Fail(fmt::format("--kl-base: vocabulary {} differs from the model's {}",
                              b->get()->config().vocab_size, c.vocab_size));
    }
    base = std::move(*b);
  }
  std::ifstream f(a.text, std::ios::binary);
  if (!f) return Fail(a.text + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::vector<int32_t> ids = tokenizer.Encode(ss.str(), a.parse_special);
  if (ids.size() < 2) return Fail(a.text + ": fewer than 2 tokens, nothing to score");
  if (a.ctx < 2) return Fail("--ctx must be at least 2");
  if (a.ctx > c.max_position_embeddings) {
    return Fail(
        fmt::format("--ctx {} exceeds the context window ({})", a.ctx, c.max_position_embeddings));
  }
  const int64_t stride = a.stride > 0 ? a.stride : std::max<int64_t>(1, a.ctx / 2);
  if (stride > a.ctx) return Fail("--stride must not exceed --ctx");
  const int64_t N = static_cast<int64_t>(ids.size()), V = c.vocab_size;

  ThreadPool pool(Globals().threads);
  double nll_sum = 0, nll_sq = 0, kl_sum = 0, bnll_sum = 0, bnll_sq = 0;
  int64_t scored = 0, agree = 0;
  int64_t next_unscored = 1;  // first token index whose prediction is not yet scored
  std::vector<double> lp, lpb;
  for (int64_t begin = 0; next_unscored < N; begin += stride) {
    const int64_t end = std::min(begin + a.ctx, N);
    std::vector<int32_t> win(ids.begin() + begin, ids.begin() + end);
    auto logits = WindowLogits(model, win, a.kv_cache_dtype, kt, pool);
    if (!logits.ok()) return Fail(logits.status().message());
    std::vector<float> base_logits;
    if (base) {
      auto bl = WindowLogits(*base, win, a.kv_cache_dtype, kt, pool);
      if (!bl.ok()) return Fail(bl.status().message());
      base_logits = std::move(*bl);
    }
    // Row r (absolute position begin + r) predicts token begin + r + 1.
    for (int64_t t = std::max(next_unscored, begin + 1); t < end; ++t) {
      const int64_t r = t - 1 - begin;
      LogSoftmax(logits->data() + r * V, V, lp);
      const double nll = -lp[ids[t]];
      nll_sum += nll;
      nll_sq += nll * nll;
      ++scored;
      if (base) {
        LogSoftmax(base_logits.data() + r * V, V, lpb);
        bnll_sum += -lpb[ids[t]];
        bnll_sq += lpb[ids[t]] * lpb[ids[t]];
        double kl = 0;
        for (int64_t v = 0; v < V; ++v) kl += std::exp(lpb[v]) * (lpb[v] - lp[v]);
        kl_sum += std::max(kl, 0.0);
        agree += Argmax(std::span<const float>(logits->data() + r * V, V)) ==
                 Argmax(std::span<const float>(base_logits.data() + r * V, V));
      }
    }
    next_unscored = end;
    std::fprintf(stderr, "\r[perplexity] %lld/%lld tokens scored, running PPL %.4f",
                 (long long)scored, (long long)(N - 1), std::exp(nll_sum / scored));
    if (end == N) break;
  }
  std::fprintf(stderr, "\n");
  // Mean NLL and its standard error over the scored tokens (llama.cpp's method).
  auto stats = [&](double sum, double sq) {
    const double mean = sum / scored;
    const double var = scored > 1 ? (sq / scored - mean * mean) * scored / (scored - 1) : 0.0;
    return std::pair<double, double>(mean, std::sqrt(std::max(var, 0.0) / scored));
  };
  const auto [mean, se_nll] = stats(nll_sum, nll_sq);
  const double ppl = std::exp(mean);
  if (a.report) {
    const auto [bmean, bse] = stats(bnll_sum, bnll_sq);
    const double bppl = std::exp(bmean), kld = kl_sum / scored;
    const double top1 = 100.0 * static_cast<double>(agree) / static_cast<double>(scored);
    std::printf("quant-report: %s vs base %s on %s (%lld tokens, ctx %lld, stride %lld)\n\n",
                a.model_dir.c_str(), a.kl_base.c_str(), a.text.c_str(), (long long)scored,
                (long long)a.ctx, (long long)stride);
    std::printf("| | base | quantized | delta |\n|---|---:|---:|---:|\n");
    std::printf("| PPL | %.4f +/- %.4f | %.4f +/- %.4f | %+.2f%% |\n", bppl, bppl * bse, ppl,
                ppl * se_nll, 100.0 * (ppl / bppl - 1.0));
    std::printf("| mean NLL | %.6f | %.6f | %+.6f |\n", bmean, mean, mean - bmean);
    std::printf("\nmean KLD(base || quantized) %.6f (target <= %.2f: %s)\n", kld, a.max_kld,
                kld <= a.max_kld ? "met" : "NOT met");
    std::printf("top-1 agreement %.2f%% (target >= %.0f%%: %s)\n", top1, a.min_top1,
                top1 >= a.min_top1 ? "met" : "NOT met");
    return 0;
  }
  std::printf("tokens %lld  ctx %lld  stride %lld\n", (long long)scored, (long long)a.ctx,
              (long long)stride);
  std::printf("mean NLL %.6f +/- %.6f\n", mean, se_nll);
  std::printf("PPL %.4f +/- %.4f\n", ppl, ppl * se_nll);
  if (base) {
    std::printf("mean KLD %.6f\n", kl_sum / scored);
    std::printf("top-1 agreement %.2f%%\n", 100.0 * agree / scored);
  }
  return 0;
}

VerbRun SetupPerplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  auto* sub = app.add_subcommand("perplexity",
                                 "Perplexity of a text file (sliding window); "
                                 "optional KL divergence against a base model");
  sub->add_option("model_dir", a->model_dir, "Hugging Face checkpoint directory")->required();
  sub->add_option("--text", a->text, "text file")->required();
  sub->add_option("--ctx", a->ctx, "window length in tokens")->capture_default_str();
  sub->add_option("--stride", a->stride, "window step (default ctx/2)");
  sub->add_option("--kl-base", a->kl_base, "base checkpoint for KL divergence / top-1 agreement");
  sub->add_flag("--parse-special", a->parse_special,
                "tokenize special-token text (chat-template markers) as the special tokens, as a "
                "chat-templated prompt is (default: as plain text)");

  AddKernelFlags(sub, &a->kernels, &a->gemm_activations);
  sub->add_option("--kv-cache-dtype", a->kv_cache_dtype,
                  "auto (= f32, exact) | bf16 | fp8_e4m3 | fp8_e4m3fnuz")
      ->capture_default_str();
  return [a]() -> int { return RunPerplexity(*a); };
}

MX_REGISTER_VERB(perplexity, "perplexity", 61, SetupPerplexity);

// `mxserve quant-report BASE_DIR QUANT_DIR --text FILE`: the perplexity of both checkpoints on
// the same windows, the mean KL divergence of the quantized next-token distributions from the
// base's, and their top-1 agreement, against the MXFP4 targets (KLD <= 0.02, top-1 >= 97%).
VerbRun SetupQuantReport(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  a->report = true;
  auto* sub = app.add_subcommand(
      "quant-report", "Quantized vs base: perplexity of both, mean KL divergence, top-1 agreement");
  sub->add_option("base_dir", a->kl_base, "the base (e.g. bf16) checkpoint")->required();
  sub->add_option("quant_dir", a->model_dir, "the quantized checkpoint")->required();
  sub->add_option("--text", a->text, "text file")->required();
  sub->add_option("--ctx", a->ctx, "window length in tokens")->capture_default_str();
  sub->add_option("--stride", a->stride, "window step (default ctx/2)");
  sub->add_option("--max-kld", a->max_kld, "KLD target")->capture_default_str();
  sub->add_option("--min-top1", a->min_top1, "top-1 agreement target (%)")->capture_default_str();
  sub->add_flag("--parse-special", a->parse_special,
                "tokenize special-token text (chat-template markers) as the special tokens, as a "
                "chat-templated prompt is (default: as plain text)");

  AddKernelFlags(sub, &a->kernels, &a->gemm_activations);
  return [a]() -> int { return RunPerplexity(*a); };
}

MX_REGISTER_VERB(quant_report, "quant-report", 62, SetupQuantReport);

}  // namespace
}  // namespace mx::cli
