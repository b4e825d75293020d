// What one benchmark run measured: a RequestRecord per request (client timestamps, server token
// counts, the error if it failed) and the aggregate BenchMetrics computed from them exactly as
// sglang bench_serving / vLLM bench serve define them (serving-benchmarks.md §1):
//   TTFT  = first chunk with non-empty text - POST issued
//   E2E   = last SSE line (incl. [DONE]) - POST issued          (sglang)
//   TPOT  = (E2E - TTFT) / (output_len - 1), requests with output_len > 1
//   ITL   = gaps between consecutive content chunks, pooled over requests
//   throughputs = totals of successful requests / benchmark duration (ramp and drain included)
// (steady_window.h judges from the same records whether a rate was sustained).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loadgen/stats.h"

namespace mx::loadgen {

// A tool call the server streamed (kept with generated_text): arguments as JSON text.
struct ToolCall {
  std::string id, name, arguments;
};

// All times are seconds relative to the benchmark start (the first dispatch opportunity).
struct RequestRecord {
  bool success = false;
  std::string error_kind;  // "", "connect", "timeout", "http_503", "malformed_sse", "dropped", ...
  std::string error;       // human-readable detail
  double arrival_s = 0;    // scheduled arrival
  double start_s = 0;      // POST issued (after any --max-concurrency wait)
  double ttft_s = 0;
  double latency_s = 0;         // E2E
  std::vector<double> itl_s;    // gaps between consecutive content chunks
  int prompt_len = 0;           // usage.prompt_tokens when reported, else the synthesized length
  int output_len = 0;           // usage.completion_tokens when reported, else content chunks
  int expected_output_len = 0;  // max_tokens asked for (with ignore_eos)
  int output_len_retokenized = -1;  // client tokenizer count of the text; -1 without tokenizer
  int cached_tokens = -1;           // usage.prompt_tokens_details.cached_tokens; -1 if absent
  bool usage_reported = false;
  std::string generated_text;
  std::string first_chunk_text;  // kept with generated_text
  // generated_text split in two (kept with it): the reasoning the server streamed apart from
  // the answer (reasoning_content, thinking or reasoning_text deltas), and the answer itself.
  std::string generated_reasoning, generated_content;
  std::vector<ToolCall> tool_calls;
  double end_s() const { return start_s + latency_s; }
};

struct BenchMetrics {
  int num_prompts = 0;
  int completed = 0;
  int failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  int64_t total_output_tokens_retokenized = 0;
  double request_throughput = 0;
  double input_throughput = 0;
  double output_throughput = 0;
  double total_throughput = 0;
  Summary ttft_ms, tpot_ms, itl_ms, e2e_latency_ms;
  double concurrency = 0;  // sum(E2E) / duration (Little's law)
  double max_output_tokens_per_s = 0;
  int max_concurrent_requests = 0;
  double success_rate = 0;  // completed / num_prompts
  std::map<std::string, int> errors_by_kind;
  int output_len_mismatches = 0;  // successful requests whose completion_tokens != max_tokens
  // Prefix cache, from usage.prompt_tokens_details.cached_tokens (successful requests).
  bool cache_reported = false;
  int64_t total_prompt_tokens = 0;
  int64_t total_cached_tokens = 0;
  double cache_hit_rate_pct = 0;
};

// REQUIRES: duration_s > 0 unless records is empty.
BenchMetrics ComputeMetrics(const std::vector<RequestRecord>& records, double duration_s);

}  // namespace mx::loadgen
