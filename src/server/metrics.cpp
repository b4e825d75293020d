// Prometheus text format rendering.
#include "server/metrics.h"

#include <type_traits>

#include <fmt/format.h>

#include "base/check.h"

namespace mx::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  MutexLock lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  MutexLock lock(mu_);
  return count_;
}

std::optional<double> Histogram::Quantile(double q) const {
  MutexLock lock(mu_);
  if (count_ == 0) return std::nullopt;
  const double rank = q * static_cast<double>(count_);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    const uint64_t prev = cum;
    cum += counts_[i];
    if (static_cast<double>(cum) >= rank && counts_[i] > 0) {
      const double lo = i == 0 ? 0.0 : bounds_[i - 1];
      return lo + (bounds_[i] - lo) * (rank - static_cast<double>(prev)) /
                      static_cast<double>(counts_[i]);
    }
  }
  return bounds_.empty() ? 0.0 : bounds_.back();
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  MutexLock lock(mu_);
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    *out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, bounds_[i], cum);
  }
  cum += counts_.back();
  *out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, cum);
  const std::string l = labels.empty() ? "" : "{" + labels + "}";
  *out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, l, sum_, name, l, count_);
}

namespace {
std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
}
}  // namespace

ModelMetrics::ModelMetrics()
    : ttft(LatencyBuckets()), itl(LatencyBuckets()), e2e(LatencyBuckets()) {}

double KvUsageRatio(const EngineStats& s) {
  return s.gauges.kv_pages_total > 0
             ? static_cast<double>(s.gauges.kv_pages_used) / s.gauges.kv_pages_total
             : 0.0;
}

double CacheHitRate(const EngineStats& s) {
  return s.counters.prompt_tokens_total > 0
             ? static_cast<double>(s.counters.radix_hit_tokens) / s.counters.prompt_tokens_total
             : 0.0;
}

namespace {

using SV = StatValue;
using ES = EngineStats;
using MM = ModelMetrics;

// In /get_server_info's order (its groups appear in the order of their first row).
constexpr ModelStatRow kModelStats[] = {
    {"num_requests_running", "gauge", "Requests in the running batch.", "requests/running", nullptr,
     [](const ES& s, const MM&) -> SV { return s.gauges.running; }},
    {"num_requests_waiting", "gauge", "Requests queued for admission.", "requests/queued", nullptr,
     [](const ES& s, const MM&) -> SV { return s.gauges.queued; }},
    {"requests_total", "counter", "Generation requests accepted by the server.",
     "requests/accepted", "requests",
     [](const ES&, const MM& m) -> SV { return int64_t{m.requests_total.load()}; }},
    {"requests_finished_total", "counter", "Requests finished by the engine.", "requests/finished",
     "finished", [](const ES& s, const MM&) -> SV { return s.counters.requests_finished; }},
    {"requests_aborted_total", "counter", "Requests aborted in the engine.", "requests/aborted",
     "aborted", [](const ES& s, const MM&) -> SV { return s.counters.requests_aborted; }},
    {"requests_rejected_total", "counter", "Requests rejected (queue full).", "requests/rejected",
     nullptr, [](const ES& s, const MM&) -> SV { return s.counters.requests_rejected; }},
    {"client_disconnects_total", "counter", "Requests aborted because the client went away.",
     "requests/client_disconnects", "client disconnects",
     [](const ES&, const MM& m) -> SV { return int64_t{m.aborted_by_client.load()}; }},
    {"kv_pages_used", "gauge", "KV cache pages in use.", "kv_cache/pages_used", nullptr,
     [](const ES& s, const MM&) -> SV { return s.gauges.kv_pages_used; }},
    {"kv_pages_total", "gauge", "KV cache pages in the pool.", "kv_cache/pages_total", nullptr,
     [](const ES& s, const MM&) -> SV { return s.gauges.kv_pages_total; }},
    {nullptr, "gauge", "Tokens per KV cache page.", "kv_cache/page_size", nullptr,
     [](const ES& s, const MM&) -> SV { return s.gauges.kv_page_size; }},
    {"kv_cache_usage_ratio", "gauge", "Fraction of KV pages in use.", "kv_cache/usage", nullptr,
     [](const ES& s, const MM&) -> SV { return KvUsageRatio(s); }},
    {"retractions_total", "counter", "Running requests retracted for KV space.",
     "kv_cache/retractions", nullptr,
     [](const ES& s, const MM&) -> SV { return s.counters.retractions; }},
    {"cache_hit_rate", "gauge", "Radix cache hit rate (cached / prompt tokens).",
     "radix_cache/hit_rate", nullptr, [](const ES& s, const MM&) -> SV { return CacheHitRate(s); }},
    {nullptr, "counter", "Prompt tokens the radix cache served.", "radix_cache/hit_tokens", nullptr,
     [](const ES& s, const MM&) -> SV { return s.counters.radix_hit_tokens; }},
    {nullptr, "counter", "Radix cache lookups.", "radix_cache/lookups", nullptr,
     [](const ES& s, const MM&) -> SV { return s.counters.radix_lookups; }},
    {"spec_accept_length", "gauge", "Mean speculative accept length (0: off).",
     "speculative/accept_length", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.accept_length_mean; }},
    {"spec_verify_steps_total", "counter", "Speculative verify steps (one per request).", nullptr,
     nullptr, [](const ES& s, const MM&) -> SV { return s.spec.verify_steps; }},
    {"spec_draft_tokens_total", "counter", "MTP draft tokens proposed.",
     "speculative/drafts_proposed", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.drafts_proposed; }},
    {"spec_accepted_tokens_total", "counter", "MTP draft tokens accepted.",
     "speculative/tokens_accepted", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.tokens_accepted; }},
    {nullptr, "gauge", "--speculative-num-steps auto.", "speculative/auto", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.automatic; }},
    {"spec_num_steps", "gauge",
     "Draft tokens per request of the last decode step (auto: as chosen; 0: off).",
     "speculative/num_steps", nullptr,
     [](const ES& s, const MM&) -> SV { return int64_t{s.spec.steps_chosen}; }},
    {nullptr, "gauge", "auto: the last decode step was a probe.", "speculative/probe", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.probe; }},
    {"spec_auto_estimate_tokens_per_second", "gauge",
     "--speculative-num-steps auto: estimated decode tokens/s of the chosen drafts.",
     "speculative/estimate_tokens_per_second", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.estimate_tokens_per_s; }},
    {"spec_auto_estimate_off_tokens_per_second", "gauge",
     "--speculative-num-steps auto: estimated decode tokens/s without drafts.",
     "speculative/estimate_off_tokens_per_second", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.estimate_off_tokens_per_s; }},
    {nullptr, "gauge", "auto: estimated tokens per verify of the chosen drafts.",
     "speculative/estimate_accept_length", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.estimate_accept_length; }},
    {nullptr, "counter", "Decode steps run with each number of drafts.",
     "speculative/steps_histogram", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.steps_histogram; }},
    {"spec_mtp_seconds_total", "counter",
     "Seconds in the MTP layer's passes (draft-extend, catch-up, draft steps).",
     "speculative/mtp_seconds", nullptr,
     [](const ES& s, const MM&) -> SV { return s.spec.mtp_seconds; }},
    {"spec_mtp_rows_total", "counter", "Rows the MTP layer's passes ran over.",
     "speculative/mtp_rows", nullptr, [](const ES& s, const MM&) -> SV { return s.spec.mtp_rows; }},
    {"forward_seconds_total", "counter", "Seconds in the target model's forwards.",
     "forward_seconds", nullptr,
     [](const ES& s, const MM&) -> SV { return s.counters.forward_seconds; }},
    {"prompt_tokens_total", "counter", "Prompt tokens processed.", "tokens/prompt_total",
     "prompt tokens", [](const ES& s, const MM&) -> SV { return s.counters.prompt_tokens_total; }},
    {"generation_tokens_total", "counter", "Tokens generated.", "tokens/generation_total",
     "generated tokens",
     [](const ES& s, const MM&) -> SV { return s.counters.generation_tokens_total; }},
    {"cached_prompt_tokens_total", "counter", "Prompt tokens served from the radix cache.",
     "tokens/cached_prompt_total", "cached prompt tokens",
     [](const ES& s, const MM&) -> SV { return s.counters.cached_prompt_tokens_total; }},
    {"sse_keepalives_total", "counter",
     "Keep-alives sent on streams quiet for --sse-keepalive-interval (a long prefill).", nullptr,
     nullptr, [](const ES&, const MM& m) -> SV { return int64_t{m.keepalives.load()}; }},
};

}  // namespace

std::span<const ModelStatRow> ModelStatTable() { return kModelStats; }

void ServerMetrics::CountHttp(int status) {
  MutexLock lock(mu_);
  ++http_by_status_[status];
}

void ServerMetrics::CountRoute(const std::string& path) {
  MutexLock lock(mu_);
  ++by_route_[path];
}

std::string ServerMetrics::Render(const std::vector<ModelView>& models) const {
  std::string out;
  auto head = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP mxserve:{} {}\n# TYPE mxserve:{} {}\n", name, help, name, type);
  };
  for (const ModelStatRow& row : ModelStatTable()) {
    if (row.metric == nullptr) continue;
    head(row.metric, row.type, row.help);
    for (const auto& m : models) {
      out += fmt::format("mxserve:{}{{model=\"{}\"}} ", row.metric, m.name);
      std::visit(
          [&out](const auto& v) {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::vector<int64_t>>) {
              MX_CHECK_MSG(false, "a vector row has no /metrics family");
            } else if constexpr (std::is_same_v<std::decay_t<decltype(v)>, bool>) {
              out += v ? "1" : "0";
            } else {
              out += fmt::format("{}", v);
            }
          },
          row.value(m.stats, *m.metrics));
      out += '\n';
    }
  }
  head("spec_steps_chosen_total", "counter", "Decode steps run with each number of drafts.");
  for (const auto& m : models) {
    const auto& h = m.stats.spec.steps_histogram;
    for (size_t i = 0; i < h.size(); ++i) {
      out += fmt::format("mxserve:spec_steps_chosen_total{{model=\"{}\",steps=\"{}\"}} {}\n",
                         m.name, i, h[i]);
    }
  }
  head("spec_accept_rate", "gauge", "Acceptance of the i-th draft token (accepted / proposed).");
  for (const auto& m : models) {
    const EngineStats& st = m.stats;
    for (size_t i = 0; i < st.spec.proposed_at.size(); ++i) {
      const double rate = st.spec.proposed_at[i] > 0
                              ? static_cast<double>(st.spec.accepted_at[i]) / st.spec.proposed_at[i]
                              : 0.0;
      out += fmt::format("mxserve:spec_accept_rate{{model=\"{}\",position=\"{}\"}} {}\n", m.name, i,
                         rate);
    }
  }
  head("moe_tuned_config", "gauge",
       "1 for the MoE kernel config state in use: tuned (a tuned config file) or default (none "
       "for this shape, dtype and ISA: run the `mxserve tune moe` command the log names).");
  for (const auto& m : models) {
    if (m.tuning.state != "tuned" && m.tuning.state != "default") continue;
    for (const char* state : {"tuned", "default"}) {
      out += fmt::format("mxserve:moe_tuned_config{{model=\"{}\",state=\"{}\"}} {}\n", m.name,
                         state, m.tuning.state == state ? 1 : 0);
    }
  }
  // Data parallelism (--dp > 1): the families above sum the replicas; these split them by
  // dp_rank. Absent when no model has replicas.
  auto per_replica = [&](const char* name, const char* type, const char* help, auto value) {
    bool any = false;
    for (const auto& m : models) any = any || !m.stats.dp_replicas.empty();
    if (!any) return;
    head(name, type, help);
    for (const auto& m : models) {
      for (size_t r = 0; r < m.stats.dp_replicas.size(); ++r) {
        out += fmt::format("mxserve:{}{{model=\"{}\",dp_rank=\"{}\"}} {}\n", name, m.name, r,
                           value(m.stats.dp_replicas[r]));
      }
    }
  };
  using RS = DpReplicaStats;
  per_replica("dp_num_requests_running", "gauge", "Requests in a replica's running batch.",
              [](const RS& r) { return r.running; });
  per_replica("dp_num_requests_waiting", "gauge", "Requests queued in a replica.",
              [](const RS& r) { return r.queued; });
  per_replica("dp_kv_pages_used", "gauge", "A replica's KV cache pages in use.",
              [](const RS& r) { return r.kv_pages_used; });
  per_replica("dp_kv_pages_total", "gauge", "A replica's KV cache pages.",
              [](const RS& r) { return r.kv_pages_total; });
  per_replica("dp_requests_routed_total", "counter", "Requests the DP router sent to a replica.",
              [](const RS& r) { return r.requests_routed; });
  per_replica("dp_replica_healthy", "gauge",
              "1 while a replica serves; 0 once it has failed (out of rotation for good).",
              [](const RS& r) { return r.healthy ? 1 : 0; });
  head("tool_call_parse_failures_total", "counter",
       "Tool-call markup returned as text: reason unknown_tool (a name not in the request's "
       "tools) or malformed (a missing <arg_value>, a call left open at the end).");
  for (const auto& m : models) {
    out += fmt::format(
        "mxserve:tool_call_parse_failures_total{{model=\"{}\",reason=\"unknown_tool\"}} {}\n",
        m.name, m.metrics->tool_calls_unknown.load());
    out += fmt::format(
        "mxserve:tool_call_parse_failures_total{{model=\"{}\",reason=\"malformed\"}} {}\n", m.name,
        m.metrics->tool_calls_malformed.load());
  }
  struct H {
    const char* name;
    const char* help;
    const Histogram ModelMetrics::*member;
  };
  for (const H& h :
       {H{"time_to_first_token_seconds", "Time to first token.", &ModelMetrics::ttft},
        H{"inter_token_latency_seconds", "Time between output tokens.", &ModelMetrics::itl},
        H{"e2e_request_latency_seconds", "End-to-end request latency.", &ModelMetrics::e2e}}) {
    head(h.name, "histogram", h.help);
    for (const auto& m : models) {
      (m.metrics->*h.member)
          .Render(std::string("mxserve:") + h.name, fmt::format("model=\"{}\"", m.name), &out);
    }
  }
  head("http_responses_total", "counter", "HTTP responses by status code.");
  MutexLock lock(mu_);
  for (const auto& [code, n] : http_by_status_) {
    out += fmt::format("mxserve:http_responses_total{{code=\"{}\"}} {}\n", code, n);
  }
  head("route_requests_total", "counter", "Requests to each generation route.");
  for (const auto& [route, n] : by_route_) {
    out += fmt::format("mxserve:route_requests_total{{route=\"{}\"}} {}\n", route, n);
  }
  return out;
}

}  // namespace mx::server
