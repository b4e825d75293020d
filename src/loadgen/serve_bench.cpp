#include "loadgen/serve_bench.h"

namespace mx::loadgen {
namespace {

constexpr uint64_t kWarmupSeedSalt = 0x9e3779b97f4a7c15ull;

}  // namespace

Result<ServeResult> RunServeBenchmark(const ServeConfig& c) {
  ServeResult r;
  MX_ASSIGN_OR_RETURN(r.prompts, MakePrompts(c.prompts, c.client.tokenizer));
  ClientOptions quiet = c.client;
  quiet.progress = nullptr;
  quiet.keep_text = false;
  int warm_sent = 0;
  if (c.warmup_requests > 0) {
    PromptSpec ws = c.prompts;
    ws.num_prompts = 1;
    ws.shared_prefix_ratio = 0;
    ws.output_len = std::min(c.prompts.output_len, 32);
    ws.seed = c.prompts.seed ^ kWarmupSeedSalt;
    MX_ASSIGN_OR_RETURN(PromptSet warm, MakePrompts(ws, c.client.tokenizer));
    std::vector<const BenchPrompt*> ps(static_cast<size_t>(c.warmup_requests), &warm.prompts[0]);
    RunOutput w = RunRequests(quiet, ps, std::vector<double>(ps.size(), 0.0));
    for (auto& rec : w.records) r.warmup_failures += rec.success ? 0 : 1;
    warm_sent += static_cast<int>(ps.size());
    if (r.warmup_failures == warm_sent) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("{}: every warmup request failed ({}: {})", c.client.base_url,
                                w.records[0].error_kind, w.records[0].error));
    }
  }
  if (c.warm_prefixes && !r.prompts.prefixes.empty()) {
    std::vector<const BenchPrompt*> ps;
    for (const BenchPrompt& p : r.prompts.prefixes) ps.push_back(&p);
    RunOutput w = RunRequests(quiet, ps, std::vector<double>(ps.size(), 0.0));
    for (auto& rec : w.records) r.warmup_failures += rec.success ? 0 : 1;
  }
  std::vector<const BenchPrompt*> ps;
  for (const BenchPrompt& p : r.prompts.prompts) ps.push_back(&p);
  const std::vector<double> arrivals =
      ArrivalTimes(static_cast<int>(ps.size()), c.request_rate, c.burstiness, c.prompts.seed);
  r.run = RunRequests(c.client, ps, arrivals);
  r.metrics = ComputeMetrics(r.run.records, r.run.duration_s);
  return r;
}

}  // namespace mx::loadgen
