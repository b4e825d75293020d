// The standard-error arithmetic against values worked by hand.
#include "eval/scoring.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mx::eval {
namespace {

std::vector<bool> Answers(int n, int correct) {
  std::vector<bool> v(n, false);
  for (int i = 0; i < correct; ++i) v[i] = true;
  return v;
}

TEST(Scoring, OneSeedIsBinomial) {
  // 27 of 500: p = 0.054, SE = sqrt(0.054 * 0.946 / 500) = 0.0101077...
  Accuracy a = ScoreOne(Answers(500, 27));
  EXPECT_EQ(a.n, 500);
  EXPECT_EQ(a.samples, 500);
  EXPECT_EQ(a.correct, 27);
  EXPECT_DOUBLE_EQ(a.mean, 0.054);
  EXPECT_NEAR(a.stderr_, std::sqrt(0.054 * 0.946 / 500), 1e-15);
  EXPECT_NEAR(a.stderr_, 0.0101077, 1e-6);
}

TEST(Scoring, AllOrNothingHasZeroError) {
  EXPECT_EQ(ScoreOne(Answers(10, 0)).stderr_, 0);
  EXPECT_EQ(ScoreOne(Answers(10, 10)).stderr_, 0);
  EXPECT_EQ(ScoreOne(Answers(10, 10)).mean, 1);
  EXPECT_EQ(ScoreSeeds({}).n, 0);
}

TEST(Scoring, SeedsClusterByQuestion) {
  // 4 questions, 2 seeds. Per-question scores 1, 0.5, 0.5, 0: mean 0.5,
  // variance (0.25 + 0 + 0 + 0.25) / 4 = 0.125, SE = sqrt(0.125 / 4) = 0.1767767.
  Accuracy a = ScoreSeeds({{true, true, false, false}, {true, false, true, false}});
  EXPECT_EQ(a.n, 4);
  EXPECT_EQ(a.samples, 8);
  EXPECT_EQ(a.correct, 4);
  EXPECT_DOUBLE_EQ(a.mean, 0.5);
  EXPECT_NEAR(a.stderr_, std::sqrt(0.125 / 4), 1e-15);
  // Identical seeds (a greedy run repeated) must not shrink the error: the clustered SE stays
  // at the one-seed value, where pooling 200 samples would divide it by sqrt(2).
  Accuracy twice = ScoreSeeds({Answers(100, 30), Answers(100, 30)});
  EXPECT_NEAR(twice.stderr_, ScoreOne(Answers(100, 30)).stderr_, 1e-15);
  EXPECT_NEAR(twice.stderr_, std::sqrt(0.3 * 0.7 / 100), 1e-15);
}

TEST(Scoring, CombinedStderr) {
  EXPECT_DOUBLE_EQ(CombinedStderr(0.03, 0.04), 0.05);
  EXPECT_DOUBLE_EQ(CombinedStderr(0, 0), 0);
}

}  // namespace
}  // namespace mx::eval
