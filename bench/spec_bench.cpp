// Single-stream decode speed with and without MTP speculative decoding: one request at a time,
// greedy, for each setting (steps/topk/draft tokens = off, 1/1/2, 3/1/4, 5/1/6) on two prompt
// sets: the bundled model's held-out arithmetic problems (chat-formatted, ends at EOS) and
// English text windows (ignore_eos, fixed length). Decode tok/s = (tokens - 1) / (time of the
// last token - time of the first), summed over the requests; the best of `repeats` runs per
// setting (the host is noisy). Prints a markdown table with the speed-up over "off" and the mean
// accept length (tokens per verify step, bonus included).
//
// Before that, the cost model (MeasureCosts: target forward of 1..max_rows rows per sequence at
// each batch size, distinct experts and weight bytes read, MTP passes), and after it the bound
// of each setting from those costs and the measured accept lengths (PrintBounds). A checkpoint
// without a tokenizer (bench-scale) runs `synthetic` prompts of random ids instead (ignore_eos).
//
//   spec_bench [model=models/glm-moe-dsa-arith-6m] [arith=20] [english=8] [english_len=64]
//              [english_out=96] [arith_out=256] [repeats=3] [threads=1] [kv=bf16]
//              [text=/usr/share/common-licenses/Artistic] [settings=0,1,3,5,auto]
//              [costs=1] [decode=1] [batches=1,2,4,8,16,32] [max_rows=6] [cost_reps=20]
//              [ctx=60] [synthetic=8] [synthetic_len=48]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "kv/paged_kv_store.h"
#include "model/model.h"
#include "model/weight_bytes.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

using mx::Engine;
using mx::GenerationRequest;

struct Run {
  double tok_s = 0;
  double accept = 0;
  int64_t tokens = 0;
};

Run Measure(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens,
            bool ignore_eos) {
  double tokens = 0, seconds = 0;
  int64_t total = 0;
  for (const auto& p : prompts) {
    GenerationRequest r;
    r.prompt = p;
    r.max_tokens = max_tokens;
    r.ignore_eos = ignore_eos;
    r.sampling.temperature = 0;
    auto s = e.Submit(r);
    if (!s.ok()) {
      std::fprintf(stderr, "submit: %s\n", s.status().ToString().c_str());
      std::exit(1);
    }
    std::vector<double> times;
    while (true) {
      auto c = (*s)->Next(std::chrono::seconds(600));
      if (!c) std::exit(1);
      times.insert(times.end(), c->token_times.begin(), c->token_times.end());
      if (c->finish != mx::FinishReason::kNone) break;
    }
    total += static_cast<int64_t>(times.size());
    if (times.size() < 2) continue;
    tokens += static_cast<double>(times.size() - 1);
    seconds += times.back() - times.front();
  }
  Run run;
  run.tok_s = seconds > 0 ? tokens / seconds : 0;
  run.accept = e.Stats().spec.accept_length_mean;
  run.tokens = total;
  return run;
}

// Best-of-`reps` seconds of fn().
template <typename F>
double BestOf(int reps, F&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The cost model of a speculative step (issue: speculative decoding that pays): for B sequences
// after `ctx` tokens of context each, the target forward over m new rows per sequence (m = 1 is
// a plain decode step, m = S + 1 the verify of S drafts) with the distinct routed experts it
// reads (summed over the MoE layers) and the weight bytes (StepWeightBytes), and one MTP pass
// over m rows per sequence (logits of the last row only, as the engine's draft-extend).
struct CostTable {
  std::vector<int64_t> batches;
  int64_t max_rows = 0;
  std::map<std::pair<int64_t, int64_t>, double> target, mtp;  // (B, m) -> seconds
};

CostTable MeasureCosts(const std::string& dir, int threads, int64_t ctx,
                       const std::vector<int64_t>& batches, int64_t max_rows, int reps) {
  auto model = mx::Model::Load(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    std::exit(1);
  }
  const mx::ModelConfig& c = (*model)->config();
  const mx::KernelTable& kt = mx::SelectKernels();
  mx::ThreadPool pool(threads);
  CostTable t;
  t.batches = batches;
  t.max_rows = max_rows;
  std::printf(
      "cost model after %lld context tokens per sequence (best of %d, ms; experts: "
      "distinct routed experts read, summed over the %lld MoE layers):\n\n",
      static_cast<long long>(ctx), reps,
      static_cast<long long>(c.num_hidden_layers - c.first_k_dense_replace));
  std::printf(
      "| batch | rows / seq | target forward | / decode step | experts | weight MB | "
      "MTP pass | MTP / decode step |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t B : batches) {
    mx::ContiguousKvStore kv(c, ctx + max_rows + 1);
    std::vector<int64_t> seqs;
    mx::ForwardBatch pre;
    for (int64_t b = 0; b < B; ++b) {
      seqs.push_back(kv.AddSequence());
      std::vector<int32_t> toks;
      for (int64_t i = 0; i < ctx; ++i) {
        toks.push_back(static_cast<int32_t>((i * 7919 + b * 104729) % c.vocab_size));
      }
      std::vector<int32_t> next(toks.begin() + 1, toks.end());
      next.push_back(1);
      pre.seqs.push_back({seqs.back(), 0, toks, next});
    }
    if (!(*model)->Forward(pre, mx::ForwardOptions(), kv, kt, pool).ok()) std::exit(1);
    double one = 0;
    for (int64_t m = 1; m <= max_rows; ++m) {
      // Distinct tokens and hidden states: MoE rows route to different experts, as in a verify.
      mx::ForwardBatch fb;
      mx::MtpBatch mb;
      mb.last_logits = true;
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int32_t> ids(m);
        std::vector<float> hidden(m * c.hidden_size);
        for (int64_t i = 0; i < m; ++i) {
          ids[i] = static_cast<int32_t>((i * 131 + b * 977 + 17) % c.vocab_size);
        }
        for (size_t i = 0; i < hidden.size(); ++i) {
          hidden[i] = static_cast<float>((i * 37 + b * 11) % 17) / 8 - 1;
        }
        fb.seqs.push_back({seqs[b], ctx, ids, {}, true});
        mb.seqs.push_back({seqs[b], ctx, ids, hidden, {}});
      }
      mx::ForwardOptions routed;
      routed.want_router = true;
      auto traced = (*model)->Forward(fb, routed, kv, kt, pool);
      if (!traced.ok()) std::exit(1);
      int64_t experts = 0;
      for (const auto& [layer, rc] : traced->router) {
        std::vector<int32_t> e = rc.experts;
        std::sort(e.begin(), e.end());
        experts += std::unique(e.begin(), e.end()) - e.begin();
      }
      const double bytes = mx::StepWeightBytes((*model)->weights(), traced->router);
      const double tf = BestOf(reps, [&] {
        if (!(*model)->Forward(fb, mx::ForwardOptions(), kv, kt, pool).ok()) std::exit(1);
      });
      const double tm = BestOf(reps, [&] {
        if (!(*model)->ForwardMtp(mb, kv, kt, pool).ok()) std::exit(1);
      });
      if (m == 1) one = tf;
      t.target[{B, m}] = tf;
      t.mtp[{B, m}] = tm;
      std::printf("| %lld | %lld | %.3f | %.2f | %lld | %.1f | %.3f | %.2f |\n",
                  static_cast<long long>(B), static_cast<long long>(m), tf * 1e3, tf / one,
                  static_cast<long long>(experts), bytes / 1e6, tm * 1e3, tm / one);
      std::fflush(stdout);
    }
  }
  std::printf("\n");
  return t;
}

// The bound of the issue for every (batch, setting): A / (verify(S+1) + S·mtp(1)) · step, with
// step = the decode forward and A the measured mean accept length; and the same with the
// engine's passes (the draft-extend over the A accepted rows, then S - 1 single-row passes).
void PrintBounds(const CostTable& t, const std::string& what,
                 const std::vector<std::pair<int, double>>& accept) {
  std::printf(
      "upper bound of the speed-up (%s): A / (verify(S+1) + S·mtp(1)) · step; "
      "engine passes: A / (verify(S+1) + mtp(ceil A) + (S-1)·mtp(1)) · step\n\n",
      what.c_str());
  std::printf(
      "| batch | setting | A | bound | bound, engine passes |\n|---:|---|---:|---:|---:|\n");
  for (int64_t B : t.batches) {
    const double step = t.target.at({B, 1});
    for (auto [S, A] : accept) {
      if (S + 1 > t.max_rows) continue;
      const double verify = t.target.at({B, S + 1}), m1 = t.mtp.at({B, 1});
      const int64_t ext = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(A)), 1, t.max_rows);
      const double bound = A * step / (verify + S * m1);
      const double engine = A * step / (verify + t.mtp.at({B, ext}) + (S - 1) * m1);
      std::printf("| %lld | %d/1/%d | %.2f | %.2fx | %.2fx |\n", static_cast<long long>(B), S,
                  S + 1, A, bound, engine);
    }
  }
  std::printf("\n");
}

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(std::stoll(x));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"model", std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m"},
      {"arith", "20"},
      {"english", "8"},
      {"english_len", "64"},
      {"english_out", "96"},
      {"arith_out", "256"},
      {"repeats", "3"},
      {"threads", "1"},
      {"kv", "bf16"},
      {"text", "/usr/share/common-licenses/Artistic"},
      {"settings", "0,1,3,5,auto"},
      {"costs", "1"},
      {"decode", "1"},
      {"batches", "1,2,4,8,16,32"},
      {"max_rows", "6"},
      {"cost_reps", "20"},
      {"ctx", "60"},
      {"synthetic", "8"},
      {"synthetic_len", "48"},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t eq = s.find('=');
    if (eq == std::string::npos || !a.contains(s.substr(0, eq))) {
      std::fprintf(stderr, "unknown argument %s (key=value; see the file's header)\n", s.c_str());
      return 2;
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  (void)mx::SetLogLevel("warn");
  const std::string dir = a["model"];
  auto tok = mx::tok::Tokenizer::FromFile(dir + "/tokenizer.json");
  auto format = mx::LoadChatFormat(dir);
  // Else (bench-scale): synthetic prompts only.
  const bool text = tok.ok() && format.ok() && format->has_value();
  std::vector<std::vector<int32_t>> arith, english, synthetic;
  if (text) {
    // Arithmetic: the held-out problems in the model's chat format.
    std::ifstream f(std::string(MX_SOURCE_DIR) + "/tests/data/arith/heldout.jsonl");
    std::string line;
    while (static_cast<int>(arith.size()) < std::stoi(a["arith"]) && std::getline(f, line)) {
      const auto j = nlohmann::json::parse(line);
      const auto prompt =
          (*format)->RenderUser(j["question"].get<std::string>(), {{"enable_thinking", false}});
      arith.push_back(tok->Encode(prompt.value()));
    }
    // English: consecutive windows of the text.
    std::ifstream tf(a["text"]);
    std::stringstream ss;
    ss << tf.rdbuf();
    const std::vector<int32_t> ids = tok->Encode(ss.str());
    const size_t len = std::stoul(a["english_len"]);
    for (size_t at = 0; english.size() < std::stoul(a["english"]) && at + len <= ids.size();
         at += len * 3) {
      english.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at),
                           ids.begin() + static_cast<std::ptrdiff_t>(at + len));
    }
  }
  {
    // Synthetic: random token ids (a checkpoint without a tokenizer, e.g. bench-scale).
    uint64_t x = 88172645463325252ull;
    std::optional<mx::ModelConfig> cfg;
    if (auto m = mx::LoadModelConfig(dir + "/config.json"); m.ok()) cfg = *m;
    const int64_t V = cfg ? cfg->vocab_size : 2;
    for (int i = 0; i < std::stoi(a["synthetic"]) && !text; ++i) {
      std::vector<int32_t> p;
      for (int j = 0; j < std::stoi(a["synthetic_len"]); ++j) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p.push_back(static_cast<int32_t>(x % static_cast<uint64_t>(V)));
      }
      synthetic.push_back(std::move(p));
    }
  }
  std::vector<int> settings;  // -1: auto
  {
    std::stringstream ss(a["settings"]);
    std::string x;
    while (std::getline(ss, x, ',')) settings.push_back(x == "auto" ? -1 : std::stoi(x));
  }
  const int threads = std::stoi(a["threads"]);
  std::optional<CostTable> costs;
  if (a["costs"] == "1") {
    costs = MeasureCosts(dir, threads, std::stoll(a["ctx"]), ParseList(a["batches"]),
                         std::stoll(a["max_rows"]), std::stoi(a["cost_reps"]));
  }
  if (a["decode"] != "1") return 0;
  auto kv_or = mx::ParseKvCacheDtype(a["kv"]);
  if (!kv_or.ok()) {
    std::fprintf(stderr, "%s\n", kv_or.status().ToString().c_str());
    return 2;
  }
  const mx::KvCacheDtype kv = *kv_or;
  std::printf("model %s, kv %s, threads %s, best of %s\n\n", dir.c_str(), a["kv"].c_str(),
              a["threads"].c_str(), a["repeats"].c_str());
  std::printf("| prompts | setting | decode tok/s | speed-up | mean accept length | tokens |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  std::vector<std::vector<std::pair<int, double>>> accepts(3);
  for (int set = 0; set < 3; ++set) {
    const auto& prompts = set == 0 ? arith : set == 1 ? english : synthetic;
    if (prompts.empty()) continue;
    const int32_t out = std::stoi(set == 1 ? a["english_out"] : a["arith_out"]);
    double base = 0;
    for (int steps : settings) {
      Run best;
      for (int rep = 0; rep < std::stoi(a["repeats"]); ++rep) {
        mx::EngineOptions o;
        o.model.model_dir = dir;
        o.threads = std::stoi(a["threads"]);
        o.kv_cache_dtype = kv;
        o.max_total_tokens = 16384;
        if (steps != 0) {
          o.speculative.algorithm = mx::SpeculativeAlgorithm::kMtp;
          if (steps > 0) o.speculative.num_steps = steps;  // else auto
        }
        auto e = mx::CreateEngine(o);
        if (!e.ok()) {
          std::fprintf(stderr, "%s\n", e.status().ToString().c_str());
          return 1;
        }
        const Run r = Measure(**e, prompts, out, /*ignore_eos=*/set != 0);
        if (r.tok_s > best.tok_s) best = r;
      }
      if (steps == 0) base = best.tok_s;
      if (steps > 0) accepts[set].push_back({steps, best.accept});
      const std::string name = steps == 0  ? "off"
                               : steps < 0 ? "auto"
                                           : fmt::format("{}/1/{}", steps, steps + 1);
      std::printf("| %s (%zu) | %s | %.0f | %.2fx | %.2f | %lld |\n",
                  set == 0   ? "arithmetic"
                  : set == 1 ? "English"
                             : "synthetic",
                  prompts.size(), name.c_str(), best.tok_s, base > 0 ? best.tok_s / base : 0.0,
                  steps == 0 ? 1.0 : best.accept, static_cast<long long>(best.tokens));
      std::fflush(stdout);
    }
  }
  std::printf("\n");
  for (int set = 0; set < 3 && costs; ++set) {
    if (accepts[set].empty()) continue;
    PrintBounds(*costs, set == 0 ? "arithmetic" : set == 1 ? "English" : "synthetic", accepts[set]);
  }
  return 0;
}
