// `bench sweep`: one open-loop run per offered request rate (a fresh prompt seed per rate so
// no point is served from an earlier point's cache), each judged sustained or not, and the
// knee = the highest rate that is sustained (serving-benchmarks.md §2.4):
//   (a) the backlog does not grow across the steady window (steady_window.h),
//   (b) 100% success,
//   (c) TTFT at the SLO percentile (p50 or p95) <= the TTFT SLO,
//   (d) no upward TTFT trend across the steady window (steady_window.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/metrics.h"
#include "loadgen/serve_bench.h"
#include "loadgen/steady_window.h"

namespace mx::loadgen {

struct SloSpec {
  double ttft_slo_ms = 5000;
  int slo_percentile = 50;  // 50 or 95
  SteadyCriteria steady;
};

struct SweepPoint {
  double rate = 0;
  BenchMetrics metrics;
  SteadyWindow steady;
  bool sustained = false;
  std::string verdict;  // "sustained", or every criterion that failed and by how much
};

// Fills point.sustained and point.verdict.
void JudgePoint(const SloSpec& slo, SweepPoint& point);

// Index of the highest sustained rate, or -1 when none is.
int FindKnee(const std::vector<SweepPoint>& points);

struct SweepReport {
  std::string title;
  std::string command;  // the command line, shown in the report
  SloSpec slo;
  double node_price_per_hour = 0;
  std::vector<SweepPoint> points;
  int knee = -1;
};

nlohmann::json SweepJson(const SweepReport& r);
std::string SweepTable(const SweepReport& r);
// A self-contained HTML page (inline CSS and SVG, no scripts): the table, throughput vs rate
// and TTFT p50/p95 vs rate with the SLO line, the knee marked on both charts.
std::string SweepHtml(const SweepReport& r);

struct SweepConfig {
  ServeConfig base;  // prompts.num_prompts is replaced per rate when duration_s > 0
  std::vector<double> rates;
  double duration_s = 0;  // > 0: num_prompts = ceil(rate * duration_s) per rate
  SloSpec slo;
};

// Runs every rate in order; `on_point` (optional) sees each point as it finishes, with its
// full metrics and records. Errors only when a run cannot start (bad prompts, no server).
Result<SweepReport> RunSweep(
    const SweepConfig& config,
    const std::function<void(const SweepPoint&, const ServeResult&)>& on_point = nullptr);

}  // namespace mx::loadgen
