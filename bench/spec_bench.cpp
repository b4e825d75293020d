// Single-stream decode speed with and without MTP speculative decoding: one request at a time,
// greedy, for each setting (steps/topk/draft tokens = off, 1/1/2, 3/1/4, 5/1/6) on two prompt
// sets: the bundled model's held-out arithmetic problems (chat-formatted, ends at EOS) and
// English text windows (ignore_eos, fixed length). Decode tok/s = (tokens - 1) / (time of the
// last token - time of the first), summed over the requests; the best of `repeats` runs per
// setting (the host is noisy). Prints a markdown table with the speed-up over "off" and the mean
// accept length (tokens per verify step, bonus included).
//
//   spec_bench [model=models/glm-moe-dsa-arith-6m] [arith=20] [english=8] [english_len=64]
//              [english_out=96] [arith_out=256] [repeats=3] [threads=1] [kv=bf16]
//              [text=/usr/share/common-licenses/Artistic] [settings=0,1,3,5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "model/model.h"
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
  run.accept = e.Stats().spec_accept_length_mean;
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

// What one speculative iteration is made of: the target forward over m new rows after a
// context of `ctx` tokens (m = 1 is a plain decode step), and one MTP-layer pass over m rows.
void PerCallCosts(const std::string& dir, int threads, int64_t ctx) {
  auto model = mx::Model::Load(dir);
  if (!model.ok()) std::exit(1);
  const mx::ModelConfig& c = (*model)->config();
  const mx::KernelTable& kt = mx::SelectKernels();
  mx::ThreadPool pool(threads);
  mx::ContiguousKvStore kv(c, ctx + 16);
  const int64_t seq = kv.AddSequence();
  mx::ForwardBatch pre;
  std::vector<int32_t> toks;
  for (int64_t i = 0; i < ctx; ++i) toks.push_back(static_cast<int32_t>((i * 7919) % c.vocab_size));
  std::vector<int32_t> next(toks.begin() + 1, toks.end());
  next.push_back(1);
  pre.seqs.push_back({seq, 0, toks, next});
  if (!(*model)->Forward(pre, mx::ForwardOptions(), kv, kt, pool).ok()) std::exit(1);
  std::printf("per-call costs after %lld context tokens (best of 200, ms):\n\n",
              static_cast<long long>(ctx));
  std::printf("| rows | target forward | ratio to 1 row | MTP pass | MTP / target 1 row |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  double one = 0;
  for (int64_t m : {1, 2, 4, 6}) {
    // Distinct tokens and hidden states: MoE rows route to different experts, as in a verify.
    std::vector<int32_t> ids(m);
    std::vector<float> hidden(m * c.hidden_size);
    for (int64_t i = 0; i < m; ++i) ids[i] = static_cast<int32_t>((i * 131 + 17) % c.vocab_size);
    for (size_t i = 0; i < hidden.size(); ++i)
      hidden[i] = static_cast<float>((i * 37) % 17) / 8 - 1;
    mx::ForwardBatch fb;
    fb.seqs.push_back({seq, ctx, ids, {}, true});
    const double t = BestOf(200, [&] {
      if (!(*model)->Forward(fb, mx::ForwardOptions(), kv, kt, pool).ok()) std::exit(1);
    });
    mx::MtpBatch mb;
    mb.seqs.push_back({seq, ctx, ids, hidden, {}});
    const double tm = BestOf(200, [&] {
      if (!(*model)->ForwardMtp(mb, kv, kt, pool).ok()) std::exit(1);
    });
    if (m == 1) one = t;
    std::printf("| %lld | %.3f | %.2f | %.3f | %.2f |\n", static_cast<long long>(m), t * 1e3,
                t / one, tm * 1e3, tm / one);
  }
  std::printf("\n");
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
      {"settings", "0,1,3,5"},
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
  auto tc = mx::LoadTokenizerChatConfig(dir);
  if (!tok.ok() || !tc.ok()) {
    std::fprintf(stderr, "%s: no tokenizer or tokenizer_config.json\n", dir.c_str());
    return 1;
  }
  auto tmpl = mx::ChatTemplate::Parse(tc->chat_template);
  if (!tmpl.ok()) return 1;
  // Arithmetic: the held-out problems in the model's chat format.
  std::vector<std::vector<int32_t>> arith;
  {
    std::ifstream f(std::string(MX_SOURCE_DIR) + "/tests/data/arith/heldout.jsonl");
    std::string line;
    while (static_cast<int>(arith.size()) < std::stoi(a["arith"]) && std::getline(f, line)) {
      const auto j = nlohmann::json::parse(line);
      mx::ChatRequest req;
      req.messages.push_back({{"role", "user"}, {"content", j["question"].get<std::string>()}});
      req.kwargs["enable_thinking"] = false;
      arith.push_back(tok->Encode(tmpl->Render(mx::MakeChatContext(req)).value()));
    }
  }
  // English: consecutive windows of the text.
  std::vector<std::vector<int32_t>> english;
  {
    std::ifstream f(a["text"]);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::vector<int32_t> ids = tok->Encode(ss.str());
    const size_t len = std::stoul(a["english_len"]);
    for (size_t at = 0; english.size() < std::stoul(a["english"]) && at + len <= ids.size();
         at += len * 3) {
      english.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at),
                           ids.begin() + static_cast<std::ptrdiff_t>(at + len));
    }
  }
  std::vector<int> settings;
  {
    std::stringstream ss(a["settings"]);
    std::string x;
    while (std::getline(ss, x, ',')) settings.push_back(std::stoi(x));
  }
  PerCallCosts(dir, std::stoi(a["threads"]), 60);
  std::printf("model %s, kv %s, threads %s, best of %s\n\n", dir.c_str(), a["kv"].c_str(),
              a["threads"].c_str(), a["repeats"].c_str());
  std::printf("| prompts | setting | decode tok/s | speed-up | mean accept length | tokens |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  for (int set = 0; set < 2; ++set) {
    const auto& prompts = set == 0 ? arith : english;
    const int32_t out = std::stoi(set == 0 ? a["arith_out"] : a["english_out"]);
    double base = 0;
    for (int steps : settings) {
      Run best;
      for (int rep = 0; rep < std::stoi(a["repeats"]); ++rep) {
        mx::EngineOptions o;
        o.model_dir = dir;
        o.threads = std::stoi(a["threads"]);
        o.kv_cache_dtype = a["kv"];
        o.max_total_tokens = 16384;
        if (steps > 0) {
          o.speculative_algorithm = "MTP";
          o.speculative_num_steps = steps;
        }
        auto e = mx::CreateEngine(o);
        if (!e.ok()) {
          std::fprintf(stderr, "%s\n", e.status().ToString().c_str());
          return 1;
        }
        const Run r = Measure(**e, prompts, out, /*ignore_eos=*/set == 1);
        if (r.tok_s > best.tok_s) best = r;
      }
      if (steps == 0) base = best.tok_s;
      const std::string name = steps == 0 ? "off" : fmt::format("{}/1/{}", steps, steps + 1);
      std::printf("| %s (%zu) | %s | %.0f | %.2fx | %.2f | %lld |\n",
                  set == 0 ? "arithmetic" : "English", prompts.size(), name.c_str(), best.tok_s,
                  base > 0 ? best.tok_s / base : 0.0, steps == 0 ? 1.0 : best.accept,
                  static_cast<long long>(best.tokens));
      std::fflush(stdout);
    }
  }
  return 0;
}
