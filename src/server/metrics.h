// Prometheus text exposition for /metrics: the server's own latency histograms (TTFT,
// inter-token, end-to-end) and HTTP counters, plus each engine's EngineStats as gauges and
// counters labelled by model. Names follow sglang/vLLM vocabulary under the `mxserve:` prefix.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/mutex.h"
#include "engine/engine.h"

namespace mx::server {

// A fixed-bucket histogram (cumulative buckets rendered as Prometheus expects).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends `name_bucket{le=...}`, `name_sum`, `name_count` lines with `labels` ("" or
  // `model="x"`).
  void Render(const std::string& name, const std::string& labels, std::string* out) const;
  uint64_t count() const;
  // The q-quantile (0 < q < 1) estimated like Prometheus' histogram_quantile: linear within
  // the bucket that holds it; the largest finite bound when it falls in +Inf. nullopt when
  // nothing was observed.
  std::optional<double> Quantile(double q) const;

 private:
  std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<uint64_t> counts_ GUARDED_BY(mu_);  // per bucket (not cumulative), plus +Inf
  double sum_ GUARDED_BY(mu_) = 0;
  uint64_t count_ GUARDED_BY(mu_) = 0;
};

// Ratios shared by /metrics and /get_server_info (0 when the denominator is 0).
double KvUsageRatio(const EngineStats& s);
double CacheHitRate(const EngineStats& s);  // radix-cached / prompt tokens

struct ModelMetrics {
  ModelMetrics();
  Histogram ttft;
  Histogram itl;
  Histogram e2e;
  std::atomic<int64_t> requests_total{0};
  std::atomic<int64_t> aborted_by_client{0};
  std::atomic<int64_t> keepalives{0};  // keep-alives sent on quiet streams
  // Tool-call markup returned as text: a call naming no declared tool, or broken markup (a
  // missing <arg_value>, a call left open at the end of the output).
  std::atomic<int64_t> tool_calls_unknown{0};
  std::atomic<int64_t> tool_calls_malformed{0};
};

// One figure per model from the engine's stats or the server's own counters, described once:
// /metrics renders every row with a `metric` name (mxserve:<metric>{model="..."}),
// /get_server_info places every row with a `json` path ("group/field") under each model, and
// the web page shows the rows with a `web` label in its totals line (/get_server_info lists
// them). A new counter is one row here. Labelled families (per draft position, per dp_rank,
// the latency histograms) are rendered beside the table.
using StatValue = std::variant<int64_t, double, bool, std::vector<int64_t>>;
struct ModelStatRow {
  const char* metric;  // Prometheus family name without the prefix; nullptr: JSON only
  const char* type;    // "gauge" | "counter"
  const char* help;
  const char* json;  // "group/field" or "field" in /get_server_info's model; nullptr: /metrics only
  const char* web;   // the web page's totals label; nullptr: not there
  StatValue (*value)(const EngineStats& s, const ModelMetrics& m);
};
std::span<const ModelStatRow> ModelStatTable();

class ServerMetrics {
 public:
  void CountHttp(int status);
  // A request to a generation route ("/v1/messages"), counted before it is validated.
  void CountRoute(const std::string& path);
  // Renders everything; `models` pairs each model name with its metrics and engine stats.
  struct ModelView {
    std::string name;
    const ModelMetrics* metrics;
    EngineStats stats;
    KernelTuningInfo tuning;  // rendered as mxserve:moe_tuned_config (nothing for state "none")
  };
  std::string Render(const std::vector<ModelView>& models) const;

 private:
  mutable Mutex mu_;
  std::map<int, int64_t> http_by_status_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> by_route_ GUARDED_BY(mu_);
};

}  // namespace mx::server
