#include "engine/step_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace mx::step_costs_test {
namespace {

// A step's true time on a made-up machine shaped like the measured one (docs/performance.md):
// fixed decode cost, a prompt token's marginal cost rising with its context until it saturates
// (sparse attention beyond index_topk), a few percent of jitter.
struct Machine {
  double decode = 0.024;                 // 4 decode rows alone
  double token_at_0 = 0.0019;            // a prompt token's marginal cost at context 0
  double token_slope = 0.0011 / 2048.0;  // per position, up to `saturates`
  double saturates = 2048.0;
  double MarginalToken(double c) const { return token_at_0 + token_slope * std::min(c, saturates); }
  double Chunk(int64_t start, int64_t n) const {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += MarginalToken(static_cast<double>(start + i));
    return s;
  }
};

TEST(StepCosts, UnobservedCostsAreUnknown) {
  StepCosts c;
  EXPECT_LT(c.DecodeSeconds(4), 0.0);
  EXPECT_LT(c.TokenSeconds(100.0), 0.0);
  EXPECT_EQ(c.TokensWithin(0.05, 0, 512), -1);
  c.Observe(4, 0, 0.0, 0.015);  // a decode step alone: the token cost is still unknown
  EXPECT_DOUBLE_EQ(c.DecodeSeconds(4), 0.015);
  EXPECT_EQ(c.TokensWithin(0.05, 0, 512), -1);
  EXPECT_EQ(c.TokensWithin(0.05, 0, 0), 0);
}

TEST(StepCosts, Buckets) {
  EXPECT_EQ(StepCosts::RowBucket(0), 0);
  EXPECT_EQ(StepCosts::RowBucket(1), 0);
  EXPECT_EQ(StepCosts::RowBucket(2), 1);
  EXPECT_EQ(StepCosts::RowBucket(3), 2);
  EXPECT_EQ(StepCosts::RowBucket(4), 2);
  EXPECT_EQ(StepCosts::RowBucket(5), 3);
  EXPECT_EQ(StepCosts::RowBucket(1 << 20), StepCosts::kRowBuckets - 1);
  EXPECT_EQ(StepCosts::ContextBucket(0.0), 0);
  EXPECT_EQ(StepCosts::ContextBucket(511.9), 0);
  EXPECT_EQ(StepCosts::ContextBucket(512.0), 1);
  EXPECT_EQ(StepCosts::ContextBucket(1023.0), 1);
  EXPECT_EQ(StepCosts::ContextBucket(1024.0), 2);
  EXPECT_EQ(StepCosts::ContextBucket(6000.0), 4);
  EXPECT_EQ(StepCosts::ContextBucket(1e12), StepCosts::kContextBuckets - 1);
  EXPECT_EQ(StepCosts::ContextBucket(std::nan("")), 0);
  EXPECT_EQ(StepCosts::ContextBucket(-5.0), 0);
}

// A long prompt prefilled while 4 rows decode, each chunk sized to fit the gap from what the
// steps so far measured: after the first few steps every step's true time is within the gap
// and not far below it, though a token costs 2.2× more at the end of the prompt than at its
// start.
TEST(StepCosts, ChunksSizedFromTheMeasuredCostsFitTheGap) {
  const Machine m;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> jitter(0.98, 1.02);
  const double gap = 0.066;
  constexpr double kOverrun = 1.08;  // a step may exceed the gap by the jitter and one bucket's lag
  StepCosts c;
  for (int i = 0; i < 3; ++i) c.Observe(4, 0, 0.0, m.decode * jitter(rng));
  int64_t pos = 0;
  int steps = 0;
  while (pos < 6000) {
    int64_t n = c.TokensWithin(gap - c.DecodeSeconds(4), pos, 512);
    if (n < 0) n = 8;  // the planner's minimum chunk while the token cost is unknown
    ASSERT_GT(n, 0) << "at " << pos;
    const double t = (m.decode + m.Chunk(pos, n)) * jitter(rng);
    if (steps >= 2) {
      EXPECT_LE(t, gap * kOverrun) << "step " << steps << " at " << pos << ", " << n << " tokens";
      EXPECT_GE(t, gap * 0.8) << "step " << steps << " at " << pos << ", " << n << " tokens";
    }
    c.Observe(4, n, StepCosts::MidContext(pos, n), t);
    pos += n;
    ++steps;
  }
  // (66 − 24) ms of 1.9–3.0 ms tokens: 14–22 tokens a step.
  EXPECT_GT(steps, 6000 / 23);
  EXPECT_LT(steps, 6000 / 13);
  // What it learned per context bucket matches the machine's marginal cost there.
  EXPECT_NEAR(c.TokenSeconds(5000.0), m.MarginalToken(5000.0), 0.05 * m.MarginalToken(5000.0));
  EXPECT_NEAR(c.TokenSeconds(300.0), m.MarginalToken(300.0), 0.15 * m.MarginalToken(300.0));
  // A second prompt starts from its own context's cost, not the end of the first one's.
  const int64_t first = c.TokensWithin(gap - c.DecodeSeconds(4), 0, 512);
  const int64_t last = c.TokensWithin(gap - c.DecodeSeconds(4), 5000, 512);
  EXPECT_GT(first, last + 4);
}

TEST(StepCosts, TokensWithinIsTheLargestChunkThatFits) {
  StepCosts c;
  c.Observe(2, 0, 0.0, 0.010);
  c.Observe(2, 100, 50.0, 0.110);  // 1 ms per token below 512
  EXPECT_DOUBLE_EQ(c.TokenSeconds(10.0), 0.001);
  EXPECT_NEAR(c.ChunkSeconds(0, 40), 0.040, 1e-12);
  EXPECT_EQ(c.TokensWithin(0.0405, 0, 512), 40);
  EXPECT_EQ(c.TokensWithin(0.0405, 0, 30), 30);  // never beyond the maximum
  EXPECT_EQ(c.TokensWithin(10.0, 0, 512), 512);  // a time no chunk fills
  EXPECT_EQ(c.TokensWithin(0.0, 0, 512), 0);     // no time left
  EXPECT_EQ(c.TokensWithin(-0.01, 0, 512), 0);
  // Unobserved context buckets borrow the nearest observed one (here the only one, below).
  EXPECT_DOUBLE_EQ(c.TokenSeconds(4000.0), 0.001);
  c.Observe(2, 100, 3000.0, 0.310);                 // 3 ms per token at 2k–4k
  EXPECT_DOUBLE_EQ(c.TokenSeconds(4000.0), 0.003);  // below: the nearest, 2k–4k
  EXPECT_DOUBLE_EQ(c.TokenSeconds(700.0), 0.003);   // 512–1k unobserved: the one above
  // A chunk whose mean position crosses into a dearer bucket is priced there.
  EXPECT_NEAR(c.ChunkSeconds(400, 300), 0.9, 1e-12);
}

TEST(StepCosts, DecodeCostsPerRowBucket) {
  StepCosts c;
  c.Observe(1, 0, 0.0, 0.018);
  c.Observe(16, 0, 0.0, 0.040);
  EXPECT_DOUBLE_EQ(c.DecodeSeconds(1), 0.018);
  EXPECT_DOUBLE_EQ(c.DecodeSeconds(16), 0.040);
  EXPECT_DOUBLE_EQ(c.DecodeSeconds(4), 0.040);    // unobserved: the one above
  EXPECT_DOUBLE_EQ(c.DecodeSeconds(100), 0.040);  // nothing above: the nearest below
  // A mixed step's prompt tokens cost what exceeds its own rows' decode cost.
  c.Observe(16, 10, 100.0, 0.060);
  EXPECT_NEAR(c.TokenSeconds(100.0), 0.002, 1e-12);
  c.Observe(1, 0, 0.0, 0.020);  // the average moves by kWeight toward a new observation
  EXPECT_NEAR(c.DecodeSeconds(1), 0.018 + 0.3 * 0.002, 1e-12);
}

TEST(StepCosts, PrefillOnlyStepsSubtractTheFewestRowsDecodeCost) {
  StepCosts c;
  c.Observe(0, 500, 250.0, 0.7);  // no decode cost known: the whole time per token
  EXPECT_DOUBLE_EQ(c.TokenSeconds(250.0), 0.7 / 500);
  StepCosts d;
  d.Observe(1, 0, 0.0, 0.02);
  d.Observe(8, 0, 0.0, 0.05);
  d.Observe(0, 500, 250.0, 0.72);  // less the 1-row decode step: 1.4 ms per token
  EXPECT_NEAR(d.TokenSeconds(250.0), 0.7 / 500, 1e-12);
  // A mixed step before any decode-only one of its rows' bucket or above teaches nothing.
  StepCosts e;
  e.Observe(4, 30, 100.0, 0.1);
  EXPECT_LT(e.TokenSeconds(100.0), 0.0);
}

TEST(StepCosts, BadTimesAreIgnored) {
  StepCosts c;
  c.Observe(4, 0, 0.0, std::nan(""));
  c.Observe(4, 0, 0.0, -1.0);
  c.Observe(4, 0, 0.0, INFINITY);
  EXPECT_LT(c.DecodeSeconds(4), 0.0);
  c.Observe(4, 0, 0.0, 0.02);
  c.Observe(4, 10, 5.0, 0.01);  // faster than the decode step alone: a marginal cost of 0
  EXPECT_DOUBLE_EQ(c.TokenSeconds(5.0), 0.0);
  EXPECT_EQ(c.TokensWithin(0.05, 0, 256), 256);
  c.Observe(4, 10, std::nan(""), 0.05);  // a NaN context lands in the first bucket
  EXPECT_GT(c.TokenSeconds(5.0), 0.0);
}

}  // namespace
}  // namespace mx::step_costs_test
