// Sampling: filter (top-k, top-p, min-p) over a softmax at the requested temperature.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"

namespace mx {

int32_t Argmax(std::span<const float> logits) {
  MX_CHECK(!logits.empty());
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  int64_t keep = V;
  if (params_.top_k > 0 && params_.top_k < V) keep = params_.top_k;
  // Candidates sorted by logit descending (ties: lower id first).
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), by_logit);
  idx.resize(keep);
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = logits[idx[0]];
  std::vector<double> p(keep);
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    p[i] = std::exp(static_cast<double>((logits[idx[i]] - max_logit) * inv_t));
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
  int64_t n = keep;
  if (params_.min_p > 0.0f) {
    const double floor = params_.min_p * p[0];
    while (n > 1 && p[n - 1] < floor) --n;
  }
  if (params_.top_p < 1.0f) {
    double cum = 0;
    for (int64_t i = 0; i < n; ++i) {
      cum += p[i];
      if (cum >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += p[i];
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_);
  for (int64_t i = 0; i < n; ++i) {
    r -= p[i];
    if (r <= 0) return idx[i];
  }
  return idx[n - 1];
}

}  // namespace mx
