#include "loadgen/sweep.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "loadgen/html_chart.h"
#include "loadgen/report.h"

namespace mx::loadgen {

void JudgePoint(const SloSpec& slo, SweepPoint& p) {
  std::vector<std::string> why;
  const SteadyWindow& w = p.steady;
  if (w.requests > 0 && !w.backlog_judged && w.success_rate > 0) {
    why.push_back(fmt::format(
        "run too short to judge throughput: median E2E {:.1f} s leaves no completions to count "
        "before the last arrival (raise --duration-s)",
        w.shift_s));
  }
  if (w.backlog_growing) {
    why.push_back(fmt::format(
        "backlog grew by {} of {} requests: {} arrived in {:.1f} s, {} completed in the same "
        "span {:.1f} s (median E2E) later; tolerance {:.1f}",
        w.backlog_growth, w.arrived, w.arrived, w.span_s, w.completed, w.shift_s,
        w.backlog_tolerance));
  }
  if (p.metrics.completed < p.metrics.num_prompts || p.metrics.num_prompts == 0) {
    why.push_back(fmt::format("success {:.1f}%", 100 * p.metrics.success_rate));
  }
  const double ttft = slo.slo_percentile >= 95 ? p.metrics.ttft_ms.p95 : p.metrics.ttft_ms.median;
  if (ttft > slo.ttft_slo_ms) {
    why.push_back(fmt::format("TTFT p{} {:.0f} ms > SLO {:.0f} ms",
                              slo.slo_percentile >= 95 ? 95 : 50, ttft, slo.ttft_slo_ms));
  }
  if (w.ttft_rising) {
    why.push_back(fmt::format(
        "TTFT rising {:.0f} -> {:.0f} ms across the window ({:.0f}% of the {:.1f} s between "
        "its thirds, Mann-Whitney z {:.1f})",
        w.ttft_first_third_ms, w.ttft_last_third_ms,
        100 * (w.ttft_last_third_ms - w.ttft_first_third_ms) / 1e3 /
            std::max(w.ttft_thirds_apart_s, 1e-9),
        w.ttft_thirds_apart_s, w.ttft_trend_z));
  }
  p.sustained = why.empty();
  p.verdict.clear();
  for (size_t i = 0; i < why.size(); ++i) p.verdict += (i ? "; " : "") + why[i];
  if (p.sustained) p.verdict = "sustained";
}

int FindKnee(const std::vector<SweepPoint>& points) {
  int knee = -1;
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].sustained &&
        (knee < 0 || points[i].rate > points[static_cast<size_t>(knee)].rate)) {
      knee = static_cast<int>(i);
    }
  }
  return knee;
}

Result<SweepReport> RunSweep(
    const SweepConfig& c,
    const std::function<void(const SweepPoint&, const ServeResult&)>& on_point) {
  if (c.rates.empty()) return InvalidArgument("--request-rates: no rates given");
  SweepReport rep;
  rep.slo = c.slo;
  for (size_t i = 0; i < c.rates.size(); ++i) {
    const double rate = c.rates[i];
    if (!(rate > 0) || std::isinf(rate)) {
      return InvalidArgument("--request-rates: {} is not a finite positive rate", rate);
    }
    ServeConfig sc = c.base;
    sc.request_rate = rate;
    // A fresh prompt seed per point: no point is served from an earlier point's prompts.
    sc.prompts.seed = c.base.prompts.seed + 1000003ull * (i + 1);
    if (c.duration_s > 0) {
      sc.prompts.num_prompts = std::max(2, static_cast<int>(std::ceil(rate * c.duration_s)));
    }
    MX_ASSIGN_OR_RETURN(ServeResult r, RunServeBenchmark(sc));
    SweepPoint p;
    p.rate = rate;
    p.metrics = r.metrics;
    p.steady = AnalyzeSteadyWindow(r.run.records, c.slo.steady);
    JudgePoint(c.slo, p);
    if (on_point) on_point(p, r);
    rep.points.push_back(std::move(p));
  }
  rep.knee = FindKnee(rep.points);
  return rep;
}

nlohmann::json SweepJson(const SweepReport& r) {
  nlohmann::json j;
  j["title"] = r.title;
  j["command"] = r.command;
  j["ttft_slo_ms"] = r.slo.ttft_slo_ms;
  j["slo_percentile"] = r.slo.slo_percentile;
  j["backlog_z"] = r.slo.steady.backlog_z;
  j["backlog_floor"] = r.slo.steady.backlog_floor;
  j["ttft_growth"] = r.slo.steady.ttft_growth;
  j["ttft_z"] = r.slo.steady.ttft_z;
  nlohmann::json pts = nlohmann::json::array();
  for (const SweepPoint& p : r.points) {
    const BenchMetrics& m = p.metrics;
    nlohmann::json x = {{"request_rate", p.rate},
                        {"completed", m.completed},
                        {"failed", m.failed},
                        {"success_rate", m.success_rate},
                        {"duration", m.duration_s},
                        {"request_throughput", m.request_throughput},
                        {"output_throughput", m.output_throughput},
                        {"total_throughput", m.total_throughput},
                        {"median_ttft_ms", m.ttft_ms.median},
                        {"p95_ttft_ms", m.ttft_ms.p95},
                        {"median_tpot_ms", m.tpot_ms.median},
                        {"median_itl_ms", m.itl_ms.median},
                        {"steady_offered_rate", p.steady.offered_rate},
                        {"steady_achieved_rate", p.steady.achieved_rate},
                        {"steady_shift_s", p.steady.shift_s},
                        {"steady_span_s", p.steady.span_s},
                        {"steady_arrived", p.steady.arrived},
                        {"steady_completed", p.steady.completed},
                        {"backlog_growth", p.steady.backlog_growth},
                        {"backlog_tolerance", p.steady.backlog_tolerance},
                        {"backlog_growing", p.steady.backlog_growing},
                        {"ttft_trend_z", p.steady.ttft_trend_z},
                        {"ttft_rising", p.steady.ttft_rising},
                        {"sustained", p.sustained},
                        {"verdict", p.verdict}};
    if (m.cache_reported) x["cache_hit_rate_pct"] = m.cache_hit_rate_pct;
    if (r.node_price_per_hour > 0) {
      x["usd_per_million_output_tokens"] =
          UsdPerMillionTokens(r.node_price_per_hour, m.output_throughput);
      x["usd_per_million_total_tokens"] =
          UsdPerMillionTokens(r.node_price_per_hour, m.total_throughput);
    }
    pts.push_back(x);
  }
  j["points"] = pts;
  if (r.knee >= 0) {
    const SweepPoint& k = r.points[static_cast<size_t>(r.knee)];
    j["knee"] = {{"request_rate", k.rate},
                 {"output_throughput", k.metrics.output_throughput},
                 {"total_throughput", k.metrics.total_throughput},
                 {"median_ttft_ms", k.metrics.ttft_ms.median},
                 {"p95_ttft_ms", k.metrics.ttft_ms.p95}};
    if (r.node_price_per_hour > 0) {
      j["knee"]["usd_per_million_output_tokens"] =
          UsdPerMillionTokens(r.node_price_per_hour, k.metrics.output_throughput);
      j["knee"]["usd_per_million_total_tokens"] =
          UsdPerMillionTokens(r.node_price_per_hour, k.metrics.total_throughput);
    }
  } else {
    j["knee"] = nullptr;
  }
  return j;
}

namespace {

struct Row {
  std::vector<std::string> cells;
};

std::vector<std::string> Header(const SweepReport& r) {
  std::vector<std::string> h = {"rate (req/s)",  "achieved (req/s)", "success %",
                                "output tok/s",  "total tok/s",      "TTFT p50 (ms)",
                                "TTFT p95 (ms)", "TPOT p50 (ms)"};
  bool cache = std::any_of(r.points.begin(), r.points.end(),
                           [](const SweepPoint& p) { return p.metrics.cache_reported; });
  if (cache) h.push_back("cache hit %");
  if (r.node_price_per_hour > 0) {
    h.push_back("$/M out");
    h.push_back("$/M total");
  }
  h.push_back("verdict");
  return h;
}

std::vector<std::string> Cells(const SweepReport& r, const SweepPoint& p, bool cache) {
  const BenchMetrics& m = p.metrics;
  std::vector<std::string> c = {fmt::format("{:g}", p.rate),
                                fmt::format("{:.3f}", p.steady.achieved_rate),
                                fmt::format("{:.1f}", 100 * m.success_rate),
                                fmt::format("{:.1f}", m.output_throughput),
                                fmt::format("{:.1f}", m.total_throughput),
                                fmt::format("{:.1f}", m.ttft_ms.median),
                                fmt::format("{:.1f}", m.ttft_ms.p95),
                                fmt::format("{:.2f}", m.tpot_ms.median)};
  if (cache) c.push_back(m.cache_reported ? fmt::format("{:.1f}", m.cache_hit_rate_pct) : "-");
  if (r.node_price_per_hour > 0) {
    c.push_back(
        fmt::format("{:.3f}", UsdPerMillionTokens(r.node_price_per_hour, m.output_throughput)));
    c.push_back(
        fmt::format("{:.3f}", UsdPerMillionTokens(r.node_price_per_hour, m.total_throughput)));
  }
  c.push_back(p.verdict);
  return c;
}

}  // namespace

std::string SweepTable(const SweepReport& r) {
  const bool cache = std::any_of(r.points.begin(), r.points.end(),
                                 [](const SweepPoint& p) { return p.metrics.cache_reported; });
  std::vector<std::vector<std::string>> rows = {Header(r)};
  for (const SweepPoint& p : r.points) rows.push_back(Cells(r, p, cache));
  std::string s = AlignedColumns(rows);
  if (r.knee >= 0) {
    const SweepPoint& k = r.points[static_cast<size_t>(r.knee)];
    s += fmt::format(
        "knee: {:g} req/s sustained (TTFT p{} SLO {:.0f} ms): {:.1f} output tok/s, "
        "{:.1f} total tok/s, TTFT p50 {:.1f} ms, p95 {:.1f} ms",
        k.rate, r.slo.slo_percentile, r.slo.ttft_slo_ms, k.metrics.output_throughput,
        k.metrics.total_throughput, k.metrics.ttft_ms.median, k.metrics.ttft_ms.p95);
    if (r.node_price_per_hour > 0) {
      s += fmt::format(", ${:.3f}/M output tok, ${:.3f}/M total tok",
                       UsdPerMillionTokens(r.node_price_per_hour, k.metrics.output_throughput),
                       UsdPerMillionTokens(r.node_price_per_hour, k.metrics.total_throughput));
    }
    s += "\n";
  } else {
    s += "knee: no rate in the sweep was sustained\n";
  }
  return s;
}

std::string SweepHtml(const SweepReport& r) {
  std::vector<double> x, out, total, p50, p95;
  for (const SweepPoint& p : r.points) {
    x.push_back(p.rate);
    out.push_back(p.metrics.output_throughput);
    total.push_back(p.metrics.total_throughput);
    p50.push_back(p.metrics.ttft_ms.median);
    p95.push_back(p.metrics.ttft_ms.p95);
  }
  std::string h = HtmlHead(r.title);
  h += "<h2>" + Escape(r.title) + "</h2>\n";
  if (!r.command.empty()) h += "<p><code>" + Escape(r.command) + "</code></p>\n";
  if (r.knee >= 0) {
    const SweepPoint& k = r.points[static_cast<size_t>(r.knee)];
    h += fmt::format(
        "<p><b>Knee: {:g} req/s</b> (highest offered rate sustained: no backlog growth, 100% "
        "success, TTFT p{} &le; {:.0f} ms, no TTFT trend) &mdash; {:.1f} output tok/s, "
        "{:.1f} total tok/s, TTFT p50 {:.1f} ms / p95 {:.1f} ms.</p>\n",
        k.rate, r.slo.slo_percentile, r.slo.ttft_slo_ms, k.metrics.output_throughput,
        k.metrics.total_throughput, k.metrics.ttft_ms.median, k.metrics.ttft_ms.p95);
  } else {
    h += "<p><b>No rate in the sweep was sustained.</b></p>\n";
  }
  h += "<div class='charts'>\n";
  const std::string xlabel = "offered request rate (req/s)";
  const std::string mark =
      r.knee >= 0 ? fmt::format("knee {:g} req/s", x[static_cast<size_t>(r.knee)]) : "";
  h +=
      LineChart("Throughput vs offered rate", xlabel, "tokens/s", x,
                {{"output tok/s", "#1f77b4", out, false}, {"total tok/s", "#ff7f0e", total, false}},
                0, "", r.knee, mark);
  h += LineChart("TTFT vs offered rate", xlabel, "TTFT (ms)", x,
                 {{"TTFT p50", "#1f77b4", p50, false}, {"TTFT p95", "#9467bd", p95, true}},
                 r.slo.ttft_slo_ms, fmt::format("SLO {:.0f} ms", r.slo.ttft_slo_ms), r.knee, mark);
  h += "</div>\n";
  const bool cache = std::any_of(r.points.begin(), r.points.end(),
                                 [](const SweepPoint& p) { return p.metrics.cache_reported; });
  std::vector<std::vector<std::string>> rows = {Header(r)};
  for (const SweepPoint& p : r.points) rows.push_back(Cells(r, p, cache));
  h += HtmlTable(rows, r.knee);
  h += "</body></html>\n";
  return h;
}

}  // namespace mx::loadgen
