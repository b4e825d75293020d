#include "eval/scoring.h"

#include <cmath>

#include "base/check.h"

namespace mx::eval {

Accuracy ScoreSeeds(const std::vector<std::vector<bool>>& correct) {
  Accuracy a;
  if (correct.empty() || correct.front().empty()) return a;
  const size_t n = correct.front().size();
  std::vector<double> per_question(n, 0.0);
  for (const std::vector<bool>& seed : correct) {
    MX_CHECK_EQ(seed.size(), n);
    for (size_t i = 0; i < n; ++i) {
      if (seed[i]) {
        per_question[i] += 1;
        a.correct += 1;
      }
    }
  }
  const double k = static_cast<double>(correct.size());
  a.n = static_cast<int>(n);
  a.samples = static_cast<int>(n * correct.size());
  double sum = 0;
  for (double& s : per_question) {
    s /= k;
    sum += s;
  }
  a.mean = sum / static_cast<double>(n);
  double var = 0;
  for (double s : per_question) var += (s - a.mean) * (s - a.mean);
  var /= static_cast<double>(n);
  a.stderr_ = std::sqrt(var / static_cast<double>(n));
  return a;
}

Accuracy ScoreOne(const std::vector<bool>& correct) { return ScoreSeeds({correct}); }

double CombinedStderr(double se_a, double se_b) { return std::sqrt(se_a * se_a + se_b * se_b); }

}  // namespace mx::eval
