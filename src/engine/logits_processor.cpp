// Penalties, masks and log-probabilities over one row of logits.
#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mx {

void ApplyPenalties(const GenerationRequest& req, const PenaltyState& st, std::span<float> logits) {
  if (req.repetition_penalty != 1.0f && req.repetition_penalty > 0.0f) {
    const float p = req.repetition_penalty;
    for (size_t t = 0; t < st.seen.size() && t < logits.size(); ++t) {
      if (!st.seen[t]) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p : logits[t] * p;
    }
  }
  if (req.frequency_penalty != 0.0f || req.presence_penalty != 0.0f) {
    for (const auto& [t, n] : st.output_counts) {
      logits[t] -= req.frequency_penalty * static_cast<float>(n) + req.presence_penalty;
    }
  }
}

void MaskTokens(std::span<const int32_t> ids, std::span<float> logits) {
  for (int32_t t : ids) {
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) {
      logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
}

float ComputeLogprob(std::span<const float> logits, int32_t token, int32_t n,
                     std::vector<TokenLogprob>* top) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  if (n > 0 && top != nullptr) {
    const int64_t V = static_cast<int64_t>(logits.size());
    const int64_t k = std::min<int64_t>(n, V);
    std::vector<int32_t> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    top->clear();
    for (int64_t i = 0; i < k; ++i) top->push_back({idx[i], logits[idx[i]] - lse});
  }
  return logits[token] - lse;
}

}  // namespace mx
