// Histogram quantiles (Prometheus histogram_quantile semantics), the shared ratios and the
// labelled gauges.
#include "server/metrics.h"

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
  s.kv_pages_total = 8;
  s.kv_pages_used = 2;
  s.prompt_tokens_total = 40;
  s.radix_hit_tokens = 10;
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
}  // namespace mx::server
