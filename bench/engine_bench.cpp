// Offline engine benchmark: N requests of P prompt tokens, a fraction of them a prefix shared by
// all, O output tokens each (ignore_eos), all submitted at once. Prints throughput, TTFT
// (mean / p50 / p99), the radix hit rate, and the KV capacity in tokens with bf16 vs fp8 KV for
// the same memory. Run it twice (radix=1 / radix=0) to see what the prefix cache buys.
// constraint=1 decodes every request under a JSON schema that cannot end within any output
// length one would bench (an array of at least 5000 {"name": string, "n": integer}), for decode
// throughput with structured output on vs off (run both, same other arguments).
//
//   engine_bench [model=models/glm-moe-dsa-arith-6m] [requests=200] [prompt=2000] [shared=0.6]
//                [output=100] [radix=1] [kv=auto] [threads=0] [chunk=512] [max_running=64]
//                [max_total_tokens=0] [constraint=0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/constraint.h"
#include "grammar/vocab_tokenizer.h"
#include "io/model_config.h"
#include "kv/paged_kv_store.h"

namespace {

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"model", std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m"},
      {"requests", "200"},
      {"prompt", "2000"},
      {"shared", "0.6"},
      {"output", "100"},
      {"radix", "1"},
      {"kv", "auto"},
      {"threads", "0"},
      {"chunk", "512"},
      {"max_running", "64"},
      {"max_total_tokens", "0"},
      {"constraint", "0"}};
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t eq = s.find('=');
    if (eq == std::string::npos || !a.count(s.substr(0, eq))) {
      std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      return 2;
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  const int n_req = std::stoi(a["requests"]), n_prompt = std::stoi(a["prompt"]),
            n_out = std::stoi(a["output"]);
  const int n_shared = static_cast<int>(std::stod(a["shared"]) * n_prompt);
  mx::EngineOptions o;
  o.model.model_dir = a["model"];
  o.threads = std::stoi(a["threads"]);
  auto kv = mx::ParseKvCacheDtype(a["kv"]);
  if (!kv.ok()) {
    std::fprintf(stderr, "%s\n", kv.status().ToString().c_str());
    return 2;
  }
  o.kv_cache_dtype = *kv;
  o.disable_radix_cache = a["radix"] == "0";
  o.chunked_prefill_size = std::stoll(a["chunk"]);
  o.max_running_requests = std::stoi(a["max_running"]);
  o.max_total_tokens = std::stoll(a["max_total_tokens"]);
  o.max_queued_requests = n_req + 1;
  auto cfg = mx::LoadModelConfig(o.model.model_dir + "/config.json");
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().ToString().c_str());
    return 1;
  }
  auto engine = mx::CreateEngine(o);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  mx::Engine& e = **engine;
  const mx::EngineStats s0 = e.Stats();
  const int64_t cap_tokens = s0.gauges.kv_pages_total * s0.gauges.kv_page_size;
  const int64_t bf16_bpt = mx::PagedKvStore::BytesPerToken(*cfg, mx::KvCacheDtype::kBf16);
  const int64_t fp8_bpt = mx::PagedKvStore::BytesPerToken(*cfg, mx::KvCacheDtype::kFp8E4M3Fn);

  std::shared_ptr<const mx::grammar::CompiledGrammar> grammar;
  if (a["constraint"] == "1") {
    auto tok = mx::tok::Tokenizer::FromFile(o.model.model_dir + "/tokenizer.json");
    if (!tok.ok()) {
      std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
      return 1;
    }
    mx::grammar::GrammarCache cache(
        mx::grammar::VocabFromTokenizer(*tok, e.eos_ids(), static_cast<int32_t>(e.vocab_size())));
    auto g =
        cache.Get({mx::grammar::ConstraintKind::kJsonSchema,
                   R"({"type":"array","items":{"type":"object","properties":{)"
                   R"("name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]},)"
                   R"("minItems":5000})",
                   {}});
    if (!g.ok()) {
      std::fprintf(stderr, "%s\n", g.status().ToString().c_str());
      return 1;
    }
    grammar = *g;
  }
  std::mt19937 rng(1);
  const int32_t V = static_cast<int32_t>(e.vocab_size());
  std::vector<int32_t> shared(n_shared);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % V);
  std::vector<std::unique_ptr<mx::RequestStream>> streams;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n_req; ++i) {
    mx::GenerationRequest r;
    r.prompt = shared;
    while (static_cast<int>(r.prompt.size()) < n_prompt) {
      r.prompt.push_back(static_cast<int32_t>(rng() % V));
    }
    r.max_tokens = n_out;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.constraint = grammar;
    auto s = e.Submit(std::move(r));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    streams.push_back(std::move(*s));
  }
  std::vector<double> ttft, e2e;
  int64_t out_tokens = 0, cached = 0;
  for (auto& s : streams) {
    while (true) {
      auto c = s->Next(std::chrono::hours(1));
      if (!c) return 1;
      out_tokens += static_cast<int64_t>(c->tokens.size());
      if (c->finish != mx::FinishReason::kNone) {
        ttft.push_back(c->ttft_seconds);
        e2e.push_back(c->e2e_seconds);
        cached += c->cached_tokens;
        break;
      }
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const mx::EngineStats st = e.Stats();
  double ttft_mean = 0;
  for (double x : ttft) ttft_mean += x / static_cast<double>(ttft.size());
  std::printf(
      "engine_bench: %d requests x (%d prompt, %d shared, %d output), radix %s, kv %s, "
      "constraint %s\n"
      "  wall %.2f s; output %.1f tok/s; total (prompt+output) %.1f tok/s\n"
      "  TTFT mean %.3f s, p50 %.3f s, p99 %.3f s; e2e p50 %.3f s\n"
      "  radix hit rate %.3f (%lld of %lld prompt tokens cached); retractions %lld\n"
      "  KV capacity %lld tokens; bytes/token bf16 %lld, fp8 %lld: fp8 holds %.2fx the tokens\n",
      n_req, n_prompt, n_shared, n_out, o.disable_radix_cache ? "off" : "on",
      mx::KvCacheDtypeName(o.kv_cache_dtype), grammar ? "json_schema" : "none", wall,
      static_cast<double>(out_tokens) / wall,
      static_cast<double>(out_tokens + int64_t{n_req} * n_prompt) / wall, ttft_mean, Pct(ttft, 0.5),
      Pct(ttft, 0.99), Pct(e2e, 0.5),
      static_cast<double>(st.counters.radix_hit_tokens) /
          static_cast<double>(std::max<int64_t>(1, st.counters.prompt_tokens_total)),
      static_cast<long long>(cached), static_cast<long long>(st.counters.prompt_tokens_total),
      static_cast<long long>(st.counters.retractions), static_cast<long long>(cap_tokens),
      static_cast<long long>(bf16_bpt), static_cast<long long>(fp8_bpt),
      static_cast<double>(bf16_bpt) / static_cast<double>(fp8_bpt));
  e.Shutdown(std::chrono::seconds(1));
  return 0;
}
