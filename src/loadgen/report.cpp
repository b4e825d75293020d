#include "loadgen/report.h"

#include <cmath>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

namespace mx::loadgen {
namespace {

void PutSummary(nlohmann::json& j, const std::string& name, const Summary& s) {
  j["mean_" + name + "_ms"] = s.mean;
  j["median_" + name + "_ms"] = s.median;
  j["std_" + name + "_ms"] = s.std;
  j["p90_" + name + "_ms"] = s.p90;
  j["p95_" + name + "_ms"] = s.p95;
  j["p99_" + name + "_ms"] = s.p99;
}

}  // namespace

std::string RunDate() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

double UsdPerMillionTokens(double usd_per_hour, double tokens_per_s) {
  if (!(usd_per_hour > 0) || !(tokens_per_s > 0)) return 0;
  return usd_per_hour / (tokens_per_s * 3600.0) * 1e6;
}

nlohmann::json ResultJson(const RunDescription& d, const BenchMetrics& m,
                          const std::vector<RequestRecord>* details) {
  nlohmann::json j;
  j["tag"] = d.tag;
  j["date"] = RunDate();
  j["backend"] = d.backend;
  j["base_url"] = d.base_url;
  j["model_id"] = d.model;
  j["dataset_name"] = d.dataset_name;
  if (std::isinf(d.request_rate) || d.request_rate <= 0) {
    j["request_rate"] = "inf";
  } else {
    j["request_rate"] = d.request_rate;
  }
  j["burstiness"] = d.burstiness;
  j["max_concurrency"] =
      d.max_concurrency > 0 ? nlohmann::json(d.max_concurrency) : nlohmann::json();
  j["num_prompts"] = d.num_prompts;
  j["random_input_len"] = d.random_input_len;
  j["random_output_len"] = d.random_output_len;
  j["random_range_ratio"] = d.random_range_ratio;
  j["shared_prefix_ratio"] = d.shared_prefix_ratio;
  j["num_prefix_groups"] = d.num_prefix_groups;
  j["seed"] = d.seed;
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["success_rate"] = m.success_rate;
  j["errors_by_kind"] = m.errors_by_kind;
  j["output_len_mismatches"] = m.output_len_mismatches;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["total_output_tokens_retokenized"] = m.total_output_tokens_retokenized;
  j["request_throughput"] = m.request_throughput;
  j["input_throughput"] = m.input_throughput;
  j["output_throughput"] = m.output_throughput;
  j["total_throughput"] = m.total_throughput;
  j["total_token_throughput"] = m.total_throughput;  // vLLM's name
  PutSummary(j, "e2e_latency", m.e2e_latency_ms);
  PutSummary(j, "ttft", m.ttft_ms);
  PutSummary(j, "tpot", m.tpot_ms);
  PutSummary(j, "itl", m.itl_ms);
  j["concurrency"] = m.concurrency;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  if (m.cache_reported) {
    j["cache_report"] = {{"total_prompt_tokens", m.total_prompt_tokens},
                         {"total_cached_tokens", m.total_cached_tokens},
                         {"cache_hit_rate_pct", m.cache_hit_rate_pct}};
  }
  if (d.node_price_per_hour > 0) {
    j["node_price_per_hour"] = d.node_price_per_hour;
    j["usd_per_million_output_tokens"] =
        UsdPerMillionTokens(d.node_price_per_hour, m.output_throughput);
    j["usd_per_million_total_tokens"] =
        UsdPerMillionTokens(d.node_price_per_hour, m.total_throughput);
  }
  if (details != nullptr) {
    nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array(),
                   ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                   starts = nlohmann::json::array(), cached = nlohmann::json::array(),
                   errors = nlohmann::json::array(), texts = nlohmann::json::array();
    for (const RequestRecord& r : *details) {
      in.push_back(r.prompt_len);
      out.push_back(r.output_len);
      ttfts.push_back(r.ttft_s);
      itls.push_back(r.itl_s);
      starts.push_back(r.start_s);
      cached.push_back(r.cached_tokens);
      errors.push_back(r.success ? std::string() : r.error_kind + ": " + r.error);
      texts.push_back(r.generated_text);
    }
    j["input_lens"] = in;
    j["output_lens"] = out;
    j["ttfts"] = ttfts;
    j["itls"] = itls;
    j["start_times"] = starts;
    j["cached_tokens"] = cached;
    j["errors"] = errors;
    j["generated_texts"] = texts;
  }
  return j;
}

std::string FormatTable(const RunDescription& d, const BenchMetrics& m) {
  std::string s;
  auto line = [&](const std::string& k, const std::string& v) {
    s += fmt::format("{:<40}{:>12}\n", k, v);
  };
  auto f2 = [](double x) { return fmt::format("{:.2f}", x); };
  auto sec = [&](const char* title) { s += fmt::format("{:-^52}\n", title); };
  s += fmt::format("{:=^52}\n", " Serving Benchmark Result ");
  line("Backend:", d.backend);
  line("Request rate (req/s):",
       std::isinf(d.request_rate) || d.request_rate <= 0 ? "inf" : f2(d.request_rate));
  line("Max request concurrency:",
       d.max_concurrency > 0 ? std::to_string(d.max_concurrency) : "not set");
  line("Successful requests:", std::to_string(m.completed));
  line("Failed requests:", std::to_string(m.failed));
  for (const auto& [kind, n] : m.errors_by_kind)
    line(fmt::format("  {}:", kind), std::to_string(n));
  line("Success rate (%):", f2(100 * m.success_rate));
  line("Benchmark duration (s):", f2(m.duration_s));
  line("Total input tokens:", std::to_string(m.total_input_tokens));
  line("Total generated tokens:", std::to_string(m.total_output_tokens));
  if (m.total_output_tokens_retokenized > 0) {
    line("Total generated tokens (retokenized):",
         std::to_string(m.total_output_tokens_retokenized));
  }
  if (m.output_len_mismatches > 0) {
    line("Outputs != max_tokens:", std::to_string(m.output_len_mismatches));
  }
  line("Request throughput (req/s):", f2(m.request_throughput));
  line("Input token throughput (tok/s):", f2(m.input_throughput));
  line("Output token throughput (tok/s):", f2(m.output_throughput));
  line("Peak output token throughput (tok/s):", f2(m.max_output_tokens_per_s));
  line("Total token throughput (tok/s):", f2(m.total_throughput));
  line("Concurrency:", f2(m.concurrency));
  line("Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  if (m.cache_reported) line("Prefix cache hit rate (%):", f2(m.cache_hit_rate_pct));
  if (d.node_price_per_hour > 0) {
    line("$ / 1M output tokens:",
         f2(UsdPerMillionTokens(d.node_price_per_hour, m.output_throughput)));
    line("$ / 1M total tokens:",
         f2(UsdPerMillionTokens(d.node_price_per_hour, m.total_throughput)));
  }
  auto block = [&](const char* title, const char* name, const Summary& x) {
    sec(title);
    line(fmt::format("Mean {} (ms):", name), f2(x.mean));
    line(fmt::format("Median {} (ms):", name), f2(x.median));
    line(fmt::format("Std {} (ms):", name), f2(x.std));
    line(fmt::format("P90 {} (ms):", name), f2(x.p90));
    line(fmt::format("P95 {} (ms):", name), f2(x.p95));
    line(fmt::format("P99 {} (ms):", name), f2(x.p99));
  };
  block("End-to-End Latency", "E2E Latency", m.e2e_latency_ms);
  block("Time to First Token", "TTFT", m.ttft_ms);
  block("Time per Output Token (excl. 1st token)", "TPOT", m.tpot_ms);
  block("Inter-Token Latency", "ITL", m.itl_ms);
  s += std::string(52, '=') + "\n";
  return s;
}

Status AppendJsonLine(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path, std::ios::app);
  if (!f) return IoError("{}: cannot open for appending", path);
  f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!f) return IoError("{}: write failed", path);
  return Status::Ok();
}

}  // namespace mx::loadgen
