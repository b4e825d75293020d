// Metric definitions on injected timestamps, checked to exact values (numpy's linear
// percentiles and population std, sglang/vLLM's TPOT, pooled ITL, peaks, hit rate) and the
// arrival schedule.
#include "loadgen/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loadgen/arrivals.h"
#include "loadgen/stats.h"

namespace mx::loadgen {
namespace {

TEST(Stats, NumpyLinearPercentiles) {
  std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 9.1);
  EXPECT_DOUBLE_EQ(Percentile(v, 95), 9.55);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 9.91);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 10);
  Summary s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_NEAR(s.std, std::sqrt(8.25), 1e-12);  // np.std, ddof = 0
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({3}, 99), 3);
}

RequestRecord Ok(double start, double ttft, std::vector<double> itl, double latency, int in,
                 int out, int cached) {
  RequestRecord r;
  r.success = true;
  r.arrival_s = start;
  r.start_s = start;
  r.ttft_s = ttft;
  r.itl_s = std::move(itl);
  r.latency_s = latency;
  r.prompt_len = in;
  r.output_len = out;
  r.expected_output_len = out;
  r.usage_reported = true;
  r.cached_tokens = cached;
  return r;
}

TEST(Metrics, ExactOnInjectedTimestamps) {
  std::vector<RequestRecord> rs;
  rs.push_back(Ok(0.0, 0.1, {0.02, 0.02, 0.02}, 0.2, 100, 4, 64));
  rs.push_back(Ok(1.0, 0.3, {0.05, 0.05}, 0.45, 100, 3, 0));
  RequestRecord bad;
  bad.arrival_s = bad.start_s = 0.6;
  bad.latency_s = 0.01;
  bad.error_kind = "http_500";
  rs.push_back(bad);
  BenchMetrics m = ComputeMetrics(rs, 2.0);
  EXPECT_EQ(m.num_prompts, 3);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.errors_by_kind.at("http_500"), 1);
  EXPECT_NEAR(m.success_rate, 2.0 / 3, 1e-12);
  EXPECT_EQ(m.total_input_tokens, 200);
  EXPECT_EQ(m.total_output_tokens, 7);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.input_throughput, 100.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.5);
  EXPECT_DOUBLE_EQ(m.total_throughput, 103.5);
  EXPECT_NEAR(m.concurrency, 0.325, 1e-12);
  // TTFT {100, 300} ms
  EXPECT_NEAR(m.ttft_ms.mean, 200, 1e-9);
  EXPECT_NEAR(m.ttft_ms.median, 200, 1e-9);
  EXPECT_NEAR(m.ttft_ms.std, 100, 1e-9);
  EXPECT_NEAR(m.ttft_ms.p90, 280, 1e-9);
  EXPECT_NEAR(m.ttft_ms.p99, 298, 1e-9);
  // TPOT {(0.2-0.1)/3, (0.45-0.3)/2} = {33.33.., 75} ms
  EXPECT_NEAR(m.tpot_ms.mean, (100.0 / 3 + 75) / 2, 1e-9);
  EXPECT_NEAR(m.tpot_ms.p95, 100.0 / 3 + (75 - 100.0 / 3) * 0.95, 1e-9);
  // ITL pooled {20, 20, 20, 50, 50} ms
  EXPECT_NEAR(m.itl_ms.mean, 32, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 20, 1e-9);
  EXPECT_NEAR(m.itl_ms.std, std::sqrt(216.0), 1e-9);
  EXPECT_NEAR(m.itl_ms.p90, 50, 1e-9);
  EXPECT_NEAR(m.itl_ms.p99, 50, 1e-9);
  // E2E {200, 450} ms
  EXPECT_NEAR(m.e2e_latency_ms.median, 325, 1e-9);
  // Token arrivals 0.10 0.12 0.14 0.16 | 1.30 1.35 1.40 -> 1-s buckets 4 and 3.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 4);
  // [0, 0.2] [1.0, 1.45] [0.6, 0.61] never overlap.
  EXPECT_EQ(m.max_concurrent_requests, 1);
  EXPECT_TRUE(m.cache_reported);
  EXPECT_EQ(m.total_cached_tokens, 64);
  EXPECT_DOUBLE_EQ(m.cache_hit_rate_pct, 32.0);
  EXPECT_EQ(m.output_len_mismatches, 0);
}

TEST(Metrics, PeakConcurrencyIsExact) {
  std::vector<RequestRecord> rs;
  // Intervals [0,1) [0.5,1.5) [0.9,2) [1,3): at most 3 at once (an end frees before a start).
  rs.push_back(Ok(0.0, 0.1, {}, 1.0, 1, 1, -1));
  rs.push_back(Ok(0.5, 0.1, {}, 1.0, 1, 1, -1));
  rs.push_back(Ok(0.9, 0.1, {}, 1.1, 1, 1, -1));
  rs.push_back(Ok(1.0, 0.1, {}, 2.0, 1, 1, -1));
  BenchMetrics m = ComputeMetrics(rs, 3.0);
  EXPECT_EQ(m.max_concurrent_requests, 3);
  EXPECT_FALSE(m.cache_reported);
  EXPECT_TRUE(m.tpot_ms.mean == 0);  // output_len 1: no TPOT samples
}

TEST(Metrics, OutputLengthMismatchCounted) {
  std::vector<RequestRecord> rs = {Ok(0, 0.1, {0.1}, 0.2, 10, 2, -1)};
  rs[0].expected_output_len = 5;
  EXPECT_EQ(ComputeMetrics(rs, 1.0).output_len_mismatches, 1);
}

TEST(Arrivals, RescaledToExactRateAndMonotone) {
  for (double b : {0.5, 1.0, 4.0, double(INFINITY)}) {
    std::vector<double> t = ArrivalTimes(200, 2.0, b, 7);
    ASSERT_EQ(t.size(), 200u);
    EXPECT_NEAR(t.back(), 100.0, 1e-9) << b;
    for (size_t i = 1; i < t.size(); ++i) ASSERT_LE(t[i - 1], t[i]);
  }
  std::vector<double> c = ArrivalTimes(4, 2.0, INFINITY, 1);
  EXPECT_NEAR(c[0], 0.5, 1e-12);
  EXPECT_NEAR(c[2], 1.5, 1e-12);
  for (double x : ArrivalTimes(5, INFINITY, 1.0, 1)) EXPECT_EQ(x, 0.0);
  EXPECT_EQ(ArrivalTimes(50, 3.0, 1.0, 9), ArrivalTimes(50, 3.0, 1.0, 9));
}

}  // namespace
}  // namespace mx::loadgen
