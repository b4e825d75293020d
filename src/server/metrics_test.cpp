// Histogram quantiles (Prometheus histogram_quantile semantics), the shared ratios and the
// labelled gauges.
#include "server/metrics.h"

#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace mx::server {
namespace {

TEST(Histogram, QuantileInterpolatesWithinTheBucket) {
  Histogram h({1.0, 2.0, 4.0});
  EXPECT_FALSE(h.Quantile(0.5).has_value());
  // 10 values in (1, 2], 10 in (2, 4].
  for (int i = 0; i < 10; ++i) h.Observe(1.5);
  for (int i = 0; i < 10; ++i) h.Observe(3.0);
  EXPECT_DOUBLE_EQ(*h.Quantile(0.25), 1.5);  // rank 5 of the 10 in (1, 2]
  EXPECT_DOUBLE_EQ(*h.Quantile(0.5), 2.0);   // rank 10: the top of (1, 2]
  EXPECT_DOUBLE_EQ(*h.Quantile(0.75), 3.0);  // rank 15: half way through (2, 4]
  EXPECT_DOUBLE_EQ(*h.Quantile(0.99), 2.0 + 2.0 * 9.8 / 10);
}

TEST(Histogram, QuantileInTheInfBucketIsTheLargestBound) {
  Histogram h({0.5, 1.0});
  h.Observe(0.1);
  h.Observe(50.0);
  h.Observe(60.0);
  EXPECT_DOUBLE_EQ(*h.Quantile(0.99), 1.0);
  EXPECT_DOUBLE_EQ(*h.Quantile(0.2), 0.5 * 0.6);  // rank 0.6 of the one in [0, 0.5]
}

TEST(Metrics, RatiosAreZeroWithoutADenominator) {
  EngineStats s;
  EXPECT_EQ(KvUsageRatio(s), 0.0);
  EXPECT_EQ(CacheHitRate(s), 0.0);
  s.gauges.kv_pages_total = 8;
  s.gauges.kv_pages_used = 2;
  s.counters.prompt_tokens_total = 40;
  s.counters.radix_hit_tokens = 10;
  EXPECT_DOUBLE_EQ(KvUsageRatio(s), 0.25);
  EXPECT_DOUBLE_EQ(CacheHitRate(s), 0.25);
}

// The MoE tuned-config gauge: one line per state for each MoE model, 1 on the state in use;
// nothing for a model without MoE layers.
TEST(Metrics, MoeTunedConfigGaugeByState) {
  ModelMetrics a, b, c;
  KernelTuningInfo tuned, untuned, none;
  tuned.state = "tuned";
  untuned.state = "default";
  ServerMetrics m;
  const std::string out =
      m.Render({{"big", &a, {}, tuned}, {"small", &b, {}, untuned}, {"dense", &c, {}, none}});
  EXPECT_NE(out.find("# TYPE mxserve:moe_tuned_config gauge\n"), std::string::npos);
  EXPECT_NE(out.find("mxserve:moe_tuned_config{model=\"big\",state=\"tuned\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("mxserve:moe_tuned_config{model=\"big\",state=\"default\"} 0\n"),
            std::string::npos);
  EXPECT_NE(out.find("mxserve:moe_tuned_config{model=\"small\",state=\"tuned\"} 0\n"),
            std::string::npos);
  EXPECT_NE(out.find("mxserve:moe_tuned_config{model=\"small\",state=\"default\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(out.find("moe_tuned_config{model=\"dense\""), std::string::npos);
}

// Per data-parallel replica: 1 while it serves, 0 once it has failed; nothing without replicas.
TEST(Metrics, DpReplicaHealthyGauge) {
  ModelMetrics a, b;
  EngineStats dp;
  dp.dp_replicas.resize(2);
  dp.dp_replicas[1].healthy = false;
  ServerMetrics m;
  const std::string out = m.Render({{"big", &a, dp, {}}, {"one", &b, {}, {}}});
  EXPECT_NE(out.find("# TYPE mxserve:dp_replica_healthy gauge\n"), std::string::npos);
  EXPECT_NE(out.find("mxserve:dp_replica_healthy{model=\"big\",dp_rank=\"0\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("mxserve:dp_replica_healthy{model=\"big\",dp_rank=\"1\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(out.find("dp_replica_healthy{model=\"one\""), std::string::npos);
  EXPECT_EQ(ServerMetrics().Render({{"one", &b, {}, {}}}).find("dp_replica_healthy"),
            std::string::npos);
}

}  // namespace

// The one table of per-model figures: every /metrics row renders as its family with its type,
// once per model, with the value its row reads; names and JSON paths are unique; every web
// total has a JSON path.
TEST(Metrics, TableRowsRenderOncePerModel) {
  ModelMetrics a;
  a.requests_total = 7;
  EngineStats s;
  s.gauges.running = 3;
  s.counters.prompt_tokens_total = 41;
  s.spec.accept_length_mean = 2.5;
  const std::string out = ServerMetrics().Render({{"x", &a, s, {}}});
  std::set<std::string> metrics, paths;
  for (const ModelStatRow& row : ModelStatTable()) {
    ASSERT_NE(row.help, nullptr);
    if (row.json != nullptr) EXPECT_TRUE(paths.insert(row.json).second) << row.json;
    if (row.web != nullptr) EXPECT_NE(row.json, nullptr) << row.web;
    if (row.metric == nullptr) continue;
    EXPECT_TRUE(metrics.insert(row.metric).second) << row.metric;
    EXPECT_NE(out.find(fmt::format("# TYPE mxserve:{} {}\n", row.metric, row.type)),
              std::string::npos)
        << row.metric;
    EXPECT_NE(out.find(fmt::format("mxserve:{}{{model=\"x\"}} ", row.metric)), std::string::npos)
        << row.metric;
  }
  EXPECT_NE(out.find("mxserve:num_requests_running{model=\"x\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("mxserve:prompt_tokens_total{model=\"x\"} 41\n"), std::string::npos);
  EXPECT_NE(out.find("mxserve:spec_accept_length{model=\"x\"} 2.5\n"), std::string::npos);
  EXPECT_NE(out.find("mxserve:requests_total{model=\"x\"} 7\n"), std::string::npos);
}

}  // namespace mx::server
