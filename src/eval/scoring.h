// Accuracy and its standard error for n questions answered under K seeds.
//
// Each question i gets a score s_i = (correct answers among its K samples) / K. The accuracy
// is the mean of s_i, and the standard error treats questions, not samples, as the unit
// (clustered by question, as in "Adding Error Bars to Evals", Miller 2024): the K samples of
// one question are not independent draws of the benchmark, so pooling n·K samples would
// understate the error. With population variance,
//   SE = sqrt( (1/n) · Σ (s_i − p)² / n ),
// which for K = 1 (s_i ∈ {0, 1}) is exactly sqrt(p(1 − p)/n). Each seed alone is also scored
// as a plain binomial mean with sqrt(p(1 − p)/n).
#pragma once

#include <vector>

namespace mx::eval {

struct Accuracy {
  int n = 0;           // questions
  int samples = 0;     // questions × seeds
  int correct = 0;     // correct samples
  double mean = 0;     // fraction in [0, 1]
  double stderr_ = 0;  // standard error of `mean`
};

// correct[s][i]: whether seed s answered question i correctly.
// REQUIRES: every row has the same length.
Accuracy ScoreSeeds(const std::vector<std::vector<bool>>& correct);

// Binomial mean and sqrt(p(1-p)/n) of one seed's answers.
Accuracy ScoreOne(const std::vector<bool>& correct);

// sqrt(a² + b²): the standard error of a difference of two independent estimates.
double CombinedStderr(double se_a, double se_b);

}  // namespace mx::eval
