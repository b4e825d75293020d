// Knee detection on injected runs (exact verdicts) and one short end-to-end sweep against the
// mock server whose capacity is known (4 slots x 100 ms = 40 req/s): 10 and 20 req/s are
// sustained, 120 req/s is not. Also the single-stream output-speed formula.
#include "loadgen/sweep.h"

#include <gtest/gtest.h>

#include <iostream>

#include "loadgen/mock_server.h"
#include "loadgen/single_stream.h"

namespace mx::loadgen {
namespace {

SweepPoint Point(double rate, bool backlog, double p50, double p95, bool rising, int failed) {
  SweepPoint p;
  p.rate = rate;
  p.steady.requests = 80;
  p.steady.success_rate = (100 - failed) / 100.0;
  p.steady.offered_rate = rate;
  p.steady.backlog_judged = true;
  p.steady.backlog_growing = backlog;
  p.steady.ttft_rising = rising;
  p.metrics.num_prompts = 100;
  p.metrics.completed = 100 - failed;
  p.metrics.failed = failed;
  p.metrics.success_rate = (100 - failed) / 100.0;
  p.metrics.ttft_ms.median = p50;
  p.metrics.ttft_ms.p95 = p95;
  return p;
}

TEST(Knee, EachCriterionCanFailAPoint) {
  SloSpec slo;  // 5000 ms at p50
  std::vector<SweepPoint> pts = {
      Point(0.5, false, 900, 1200, false, 0),   // sustained
      Point(1.0, false, 1500, 5200, false, 0),  // sustained (p95 over SLO, but SLO is p50)
      Point(1.5, true, 2500, 4000, false, 0),   // backlog growing
      Point(2.0, false, 3000, 4000, false, 1),  // one failure
      Point(2.2, false, 5100, 6000, false, 0),  // p50 over SLO
      Point(2.4, false, 1000, 2000, true, 0),   // TTFT trend
  };
  for (auto& p : pts) JudgePoint(slo, p);
  EXPECT_TRUE(pts[0].sustained);
  EXPECT_TRUE(pts[1].sustained);
  EXPECT_FALSE(pts[2].sustained);
  EXPECT_NE(pts[2].verdict.find("backlog grew"), std::string::npos);
  EXPECT_FALSE(pts[3].sustained);
  EXPECT_NE(pts[3].verdict.find("success"), std::string::npos);
  EXPECT_FALSE(pts[4].sustained);
  EXPECT_NE(pts[4].verdict.find("SLO"), std::string::npos);
  EXPECT_FALSE(pts[5].sustained);
  EXPECT_NE(pts[5].verdict.find("rising"), std::string::npos);
  EXPECT_EQ(FindKnee(pts), 1);
  slo.slo_percentile = 95;
  JudgePoint(slo, pts[1]);
  EXPECT_FALSE(pts[1].sustained);
  EXPECT_EQ(FindKnee(pts), 0);
  for (auto& p : pts) p.sustained = false;
  EXPECT_EQ(FindKnee(pts), -1);
}

TEST(Knee, AVerdictSaysWhyAPointFailed) {
  SloSpec slo;
  SweepPoint p = Point(2.0, true, 900, 1200, true, 0);
  p.steady.shift_s = 12.5;
  p.steady.span_s = 30;
  p.steady.arrived = 60;
  p.steady.completed = 41;
  p.steady.backlog_growth = 19;
  p.steady.backlog_tolerance = 10.9;
  p.steady.ttft_first_third_ms = 800;
  p.steady.ttft_last_third_ms = 4800;
  p.steady.ttft_thirds_apart_s = 20;
  p.steady.ttft_trend_z = 4.1;
  JudgePoint(slo, p);
  EXPECT_FALSE(p.sustained);
  EXPECT_EQ(p.verdict,
            "backlog grew by 19 of 60 requests: 60 arrived in 30.0 s, 41 completed in the same "
            "span 12.5 s (median E2E) later; tolerance 10.9; TTFT rising 800 -> 4800 ms across "
            "the window (20% of the 20.0 s between its thirds, Mann-Whitney z 4.1)");
  // A median E2E past the last arrival: nothing to count, said so, not sustained.
  SweepPoint q = Point(0.2, false, 900, 1200, false, 0);
  q.steady.backlog_judged = false;
  q.steady.shift_s = 70;
  JudgePoint(slo, q);
  EXPECT_FALSE(q.sustained);
  EXPECT_NE(q.verdict.find("run too short to judge throughput: median E2E 70.0 s"),
            std::string::npos)
      << q.verdict;
}

TEST(Knee, ReportHasChartsTableAndKnee) {
  SweepReport r;
  r.title = "t <x>";
  r.node_price_per_hour = 10;
  r.points = {Point(1, false, 100, 200, false, 0), Point(2, true, 9000, 9999, true, 0)};
  r.points[0].metrics.output_throughput = 3600;  // $10/h at 3600 tok/s = $0.7716/M
  for (auto& p : r.points) JudgePoint(r.slo, p);
  r.knee = FindKnee(r.points);
  ASSERT_EQ(r.knee, 0);
  const std::string html = SweepHtml(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("knee 1 req/s"), std::string::npos);
  EXPECT_NE(html.find("t &lt;x&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  auto j = SweepJson(r);
  EXPECT_EQ(j["knee"]["request_rate"], 1.0);
  EXPECT_NEAR(j["knee"]["usd_per_million_output_tokens"].get<double>(), 10.0 / 3600 / 3600 * 1e6,
              1e-9);
  EXPECT_NE(SweepTable(r).find("knee: 1 req/s"), std::string::npos);
}

TEST(Sweep, EndToEndFindsTheMockServersCapacity) {
  MockServerOptions so;
  so.ttft_ms = 40;
  so.itl_ms = 20;  // 4 tokens: 40 + 3 * 20 = 100 ms per request
  so.slots = 8;    // capacity 80 req/s: 4x the highest sustained rate, so a loaded host's
                   // scheduling noise cannot push the two low rates over the edge
  auto server = MockServer::Start(so);
  ASSERT_TRUE(server.ok());
  SweepConfig c;
  c.base.client.base_url = (*server)->base_url();
  c.base.prompts.input_len = 16;
  c.base.prompts.output_len = 4;
  c.base.warmup_requests = 4;
  c.rates = {10, 20, 400};
  c.duration_s = 1.5;
  c.slo.ttft_slo_ms = 1000;
  // 15 and 30 requests per point, judged by the default rule; 400 req/s (5x the capacity)
  // grows a backlog of most of what arrives.
  // A loaded CI host (sanitizers, a parallel test) can stall every thread for a few hundred ms,
  // which a 1.5 s window cannot absorb: up to three sweeps, the first whose low rates hold is
  // judged. A server that really lacked the capacity fails all three.
  Result<SweepReport> r = RunSweep(c);
  for (int attempt = 1; attempt < 3; ++attempt) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->points.size(), 3u);
    if (r->points[0].sustained && r->points[1].sustained) break;
    std::cerr << "sweep attempt " << attempt << " not sustained: " << r->points[0].verdict << " | "
              << r->points[1].verdict << "\n";
    r = RunSweep(c);
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->points.size(), 3u);
  EXPECT_EQ(r->points[0].metrics.num_prompts, 15);
  EXPECT_TRUE(r->points[0].sustained) << r->points[0].verdict;
  EXPECT_TRUE(r->points[1].sustained) << r->points[1].verdict;
  EXPECT_FALSE(r->points[2].sustained) << r->points[2].verdict;
  EXPECT_EQ(r->knee, 1);
}

TEST(SingleStream, NaturalPromptsAndOutputSpeed) {
  auto t = tok::Tokenizer::FromFile(std::string(MX_SOURCE_DIR) +
                                    "/models/glm-moe-dsa-arith-6m/tokenizer.json");
  ASSERT_TRUE(t.ok());
  SingleStreamSpec spec;
  spec.input_len = 300;
  spec.output_len = 11;
  spec.runs = 3;
  auto prompts = MakeNaturalPrompts(spec, *t);
  if (!prompts.ok() && prompts.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << prompts.status().ToString();
  }
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  ASSERT_EQ(prompts->size(), 3u);
  EXPECT_NE((*prompts)[0].text, (*prompts)[1].text);
  for (const BenchPrompt& p : *prompts) {
    EXPECT_NEAR(p.prompt_len, 300, 2);
    EXPECT_NE(p.text.find("icens"), std::string::npos);  // licence / license text
  }
  MockServerOptions so;
  so.ttft_ms = 30;
  so.itl_ms = 20;
  auto server = MockServer::Start(so);
  ASSERT_TRUE(server.ok());
  ClientOptions o;
  o.base_url = (*server)->base_url();
  o.endpoint = Endpoint::kChat;
  SingleStreamResult r = RunSingleStream(o, *prompts, *t);
  EXPECT_EQ(r.failed, 0);
  ASSERT_EQ(r.runs.size(), 3u);
  // 11 tokens, one per chunk: 10 after the first, 20 ms apart -> 50 tok/s (server count).
  EXPECT_EQ(r.runs[0].server_tokens, 11);
  EXPECT_GT(r.median_speed_server, 50 * 0.7);
  EXPECT_LT(r.median_speed_server, 50 * 1.15);
  EXPECT_GE(r.median_ttft_ms, 30);
  EXPECT_GT(r.runs[0].tokenizer_tokens, 0);
}

}  // namespace
}  // namespace mx::loadgen
