// Results as files and text: one JSON object per run with sglang bench_serving field names
// (plus vLLM's `failed`, `total_token_throughput`, `burstiness`, `date`, `model_id`), appended
// as one line to --output-file; and the human-readable table printed on stdout.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "loadgen/metrics.h"

namespace mx::loadgen {

struct RunDescription {
  std::string tag;
  std::string backend = "openai";  // "openai" (completions) or "openai-chat"
  std::string base_url;
  std::string model;
  std::string dataset_name = "random";
  double request_rate = 0;  // inf for all at once
  double burstiness = 1.0;
  int max_concurrency = 0;  // 0 = none (JSON null)
  int num_prompts = 0;
  int random_input_len = 0;
  int random_output_len = 0;
  double random_range_ratio = 1.0;
  double shared_prefix_ratio = 0;
  int num_prefix_groups = 0;
  uint64_t seed = 0;
  double node_price_per_hour = 0;  // > 0 adds cost fields
};

// The run's JSON object. `details` (with --output-details) adds per-request arrays:
// input_lens, output_lens, ttfts and itls (seconds), start_times, cached_tokens, errors,
// generated_texts.
nlohmann::json ResultJson(const RunDescription& d, const BenchMetrics& m,
                          const std::vector<RequestRecord>* details = nullptr);

// $ per million tokens at `tokens_per_s` on a node costing `usd_per_hour`; 0 when undefined.
// The local time as the JSON's `date` (sglang's format, YYYYMMDD-HHMMSS).
std::string RunDate();
double UsdPerMillionTokens(double usd_per_hour, double tokens_per_s);

// The stdout table, in the layout of sglang's "Serving Benchmark Result".
std::string FormatTable(const RunDescription& d, const BenchMetrics& m);

// Appends `j` as one line to `path` (created if missing).
Status AppendJsonLine(const std::string& path, const nlohmann::json& j);

}  // namespace mx::loadgen
