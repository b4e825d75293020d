#include "engine/step_costs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace mx::step_costs_test {
namespace {

TEST(StepCosts, UnobservedCostsGiveTheMinimumChunk) {
  StepCosts c;
  EXPECT_EQ(c.PrefillBudget(0.05, 32, 512), 32);
  c.Observe(4, 0, 0.015);  // a decode step alone: the token cost is still unknown
  EXPECT_EQ(c.PrefillBudget(0.05, 32, 512), 32);
  EXPECT_EQ(c.PrefillBudget(0.05, 32, 16), 16);  // never beyond the maximum
}

// Steps drawn from t = D + c·n with a few percent of jitter: the budget converges to
// (target − D) / c.
TEST(StepCosts, BudgetFollowsTheMeasuredDecodeAndTokenCosts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.97, 1.03);
  const double decode = 0.015;
  const double per_token = 0.0013;
  StepCosts c;
  for (int i = 0; i < 40; ++i) {
    c.Observe(4, 0, decode * jitter(rng));
    const int64_t n = 16 + static_cast<int64_t>(rng() % 48);
    c.Observe(4, n, (decode + per_token * static_cast<double>(n)) * jitter(rng));
  }
  EXPECT_NEAR(c.decode_seconds(), decode, 0.05 * decode);
  EXPECT_NEAR(c.prefill_token_seconds(), per_token, 0.15 * per_token);
  const double expected = (0.045 - decode) / per_token;  // 23 tokens
  EXPECT_NEAR(static_cast<double>(c.PrefillBudget(0.045, 8, 512)), expected, 0.2 * expected);
  EXPECT_EQ(c.PrefillBudget(0.010, 8, 512), 8);   // the decode step alone exceeds the target
  EXPECT_EQ(c.PrefillBudget(10.0, 8, 512), 512);  // a target no chunk reaches
}

TEST(StepCosts, PrefillOnlyStepsCountTheirWholeTimePerToken) {
  StepCosts c;
  c.Observe(0, 500, 0.7);  // no decode rows: 1.4 ms per token, fixed cost included
  EXPECT_DOUBLE_EQ(c.prefill_token_seconds(), 0.7 / 500);
  EXPECT_LT(c.decode_seconds(), 0.0);
  // A mixed step before any decode-only one teaches nothing (its decode share is unknown).
  c.Observe(4, 30, 0.1);
  EXPECT_DOUBLE_EQ(c.prefill_token_seconds(), 0.7 / 500);
}

TEST(StepCosts, TheTokenCostFollowsARisingContext) {
  StepCosts c;
  c.Observe(2, 0, 0.010);
  double per_token = 0.001;
  for (int i = 0; i < 30; ++i) {
    c.Observe(2, 32, 0.010 + per_token * 32);
    per_token *= 1.05;  // attention over a growing prompt
  }
  // Within the last few steps' costs, not the average of all of them.
  EXPECT_GT(c.prefill_token_seconds(), per_token / 1.05 / 1.25);
  EXPECT_LT(c.prefill_token_seconds(), per_token);
}

TEST(StepCosts, BadTimesAreIgnored) {
  StepCosts c;
  c.Observe(4, 0, std::nan(""));
  c.Observe(4, 0, -1.0);
  c.Observe(4, 0, INFINITY);
  EXPECT_LT(c.decode_seconds(), 0.0);
  c.Observe(4, 0, 0.02);
  c.Observe(4, 10, 0.01);  // faster than the decode step alone: a marginal cost of 0, not < 0
  EXPECT_GE(c.prefill_token_seconds(), 0.0);
  EXPECT_EQ(c.PrefillBudget(0.05, 8, 256), 256);
}

}  // namespace
}  // namespace mx::step_costs_test
