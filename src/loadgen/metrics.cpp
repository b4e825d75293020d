#include "loadgen/metrics.h"

#include <algorithm>
#include <cmath>

namespace mx::loadgen {
namespace {

std::vector<double> ToMs(const std::vector<double>& s) {
  std::vector<double> ms;
  ms.reserve(s.size());
  for (double x : s) ms.push_back(x * 1e3);
  return ms;
}

// vLLM's max_output_tokens_per_s: token arrivals start + ttft + cumsum(itl) of successful
// requests, counted in 1-second buckets from the first request's start.
double PeakOutputTokensPerSecond(const std::vector<RequestRecord>& records) {
  std::map<int64_t, int64_t> buckets;
  double t0 = 1e300;
  for (const RequestRecord& r : records) t0 = std::min(t0, r.start_s);
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    double t = r.start_s + r.ttft_s;
    buckets[static_cast<int64_t>(std::floor(t - t0))]++;
    for (double gap : r.itl_s) {
      t += gap;
      buckets[static_cast<int64_t>(std::floor(t - t0))]++;
    }
  }
  int64_t peak = 0;
  for (auto& [b, n] : buckets) peak = std::max(peak, n);
  return static_cast<double>(peak);
}

// Exact sweep line over [start, end) intervals of every request (vLLM).
int PeakConcurrency(const std::vector<RequestRecord>& records) {
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : records) {
    events.push_back({r.start_s, +1});
    events.push_back({r.end_s(), -1});
  }
  // An end at the same instant as a start frees its slot first.
  std::sort(events.begin(), events.end());
  int cur = 0, peak = 0;
  for (auto& [t, d] : events) {
    cur += d;
    peak = std::max(peak, cur);
  }
  return peak;
}

}  // namespace

BenchMetrics ComputeMetrics(const std::vector<RequestRecord>& records, double duration_s) {
  BenchMetrics m;
  m.num_prompts = static_cast<int>(records.size());
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  double e2e_sum = 0;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      m.failed++;
      m.errors_by_kind[r.error_kind.empty() ? "unknown" : r.error_kind]++;
      continue;
    }
    m.completed++;
    m.total_input_tokens += r.prompt_len;
    m.total_output_tokens += r.output_len;
    if (r.output_len_retokenized >= 0)
      m.total_output_tokens_retokenized += r.output_len_retokenized;
    if (r.expected_output_len > 0 && r.usage_reported && r.output_len != r.expected_output_len) {
      m.output_len_mismatches++;
    }
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.latency_s);
    e2e_sum += r.latency_s;
    if (r.output_len > 1) tpot.push_back((r.latency_s - r.ttft_s) / (r.output_len - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.cached_tokens >= 0) {
      m.cache_reported = true;
      m.total_cached_tokens += r.cached_tokens;
    }
    m.total_prompt_tokens += r.prompt_len;
  }
  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.input_throughput = static_cast<double>(m.total_input_tokens) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
    m.concurrency = e2e_sum / duration_s;
  }
  m.ttft_ms = Summarize(ToMs(ttft));
  m.tpot_ms = Summarize(ToMs(tpot));
  m.itl_ms = Summarize(ToMs(itl));
  m.e2e_latency_ms = Summarize(ToMs(e2e));
  m.max_output_tokens_per_s = PeakOutputTokensPerSecond(records);
  m.max_concurrent_requests = PeakConcurrency(records);
  m.success_rate = m.num_prompts > 0 ? static_cast<double>(m.completed) / m.num_prompts : 0;
  if (m.total_prompt_tokens > 0) {
    m.cache_hit_rate_pct = 100.0 * static_cast<double>(m.total_cached_tokens) /
                           static_cast<double>(m.total_prompt_tokens);
  }
  return m;
}

}  // namespace mx::loadgen
