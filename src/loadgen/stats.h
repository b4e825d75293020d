// Order statistics as numpy computes them: np.percentile's default "linear" method (Hyndman &
// Fan type 7) and np.std with ddof = 0, so a summary matches sglang bench_serving and vLLM
// bench serve on the same samples.
#pragma once

#include <vector>

namespace mx::loadgen {

// The p-th percentile (0 <= p <= 100) of `values` with linear interpolation between closest
// ranks; 0 for an empty input. `values` need not be sorted.
double Percentile(std::vector<double> values, double p);

// mean, median, population std and p90/p95/p99 of one metric (all zero when empty).
struct Summary {
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0;
};
Summary Summarize(const std::vector<double>& values);

}  // namespace mx::loadgen
