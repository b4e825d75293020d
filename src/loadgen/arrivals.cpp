#include "loadgen/arrivals.h"

#include <cmath>
#include <random>

namespace mx::loadgen {

std::vector<double> ArrivalTimes(int n, double rate, double burstiness, uint64_t seed) {
  std::vector<double> t(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (n <= 0 || !(rate > 0) || std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  double acc = 0;
  for (int i = 0; i < n; ++i) {
    double gap;
    if (std::isinf(burstiness) || !(burstiness > 0)) {
      gap = 1.0 / rate;
    } else {
      std::gamma_distribution<double> g(burstiness, 1.0 / (rate * burstiness));
      gap = g(rng);
    }
    acc += gap;
    t[static_cast<size_t>(i)] = acc;
  }
  // Rescale so the last arrival lands exactly at n / rate (vLLM without ramp-up), which makes
  // the offered rate exact over the run.
  const double target = static_cast<double>(n) / rate;
  const double scale = acc > 0 ? target / acc : 1.0;
  for (double& x : t) x *= scale;
  return t;
}

}  // namespace mx::loadgen
