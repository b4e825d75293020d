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

Sampler::Candidates Sampler::Filter(std::span<const float> logits) const {
  const int64_t V = static_cast<int64_t>(logits.size());
  Candidates c;
  c.ids.resize(V);
  std::iota(c.ids.begin(), c.ids.end(), 0);
  int64_t keep = V;
  if (params_.top_k > 0 && params_.top_k < V) keep = params_.top_k;
  // Candidates sorted by logit descending (ties: lower id first).
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(c.ids.begin(), c.ids.begin() + keep, c.ids.end(), by_logit);
  c.ids.resize(keep);
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = logits[c.ids[0]];
  std::vector<double>& p = c.p;
  p.resize(keep);
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    p[i] = std::exp(static_cast<double>((logits[c.ids[i]] - max_logit) * inv_t));
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
  c.ids.resize(n);
  p.resize(n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += p[i];
  for (auto& x : p) x /= total;
  return c;
}

int32_t Sampler::Draw(const Candidates& c, int32_t exclude) {
  const int64_t n = static_cast<int64_t>(c.ids.size());
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += c.ids[i] == exclude ? 0.0 : c.p[i];
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_);
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i) {
    // A masked token (p = 0) is never drawn, not even by rounding left over at the end.
    if (c.ids[i] == exclude || c.p[i] == 0) continue;
    last = i;
    r -= c.p[i];
    if (r <= 0) return c.ids[i];
  }
  MX_CHECK_GE(last, 0);
  return c.ids[last];
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  return Draw(Filter(logits), -1);
}

int32_t Sampler::SampleSpeculative(std::span<const float> logits, int32_t draft) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  const Candidates c = Filter(logits);
  double p_draft = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (c.ids[i] == draft) p_draft = c.p[i];
  }
  if (p_draft > 0) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(rng_) < p_draft) return draft;  // always when it is the only candidate (p = 1)
  }
  return Draw(c, draft);
}

}  // namespace mx
