#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>

namespace mx::loadgen {
namespace {

// REQUIRES: `sorted` ascending and non-empty.
double SortedPercentile(const std::vector<double>& sorted, double p) {
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return SortedPercentile(values, std::clamp(p, 0.0, 100.0));
}

Summary Summarize(const std::vector<double>& values) {
  Summary s;
  if (values.empty()) return s;
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(v.size()));
  s.median = SortedPercentile(v, 50);
  s.p90 = SortedPercentile(v, 90);
  s.p95 = SortedPercentile(v, 95);
  s.p99 = SortedPercentile(v, 99);
  return s;
}

}  // namespace mx::loadgen
