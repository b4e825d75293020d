// Token sampling from one row of logits: greedy at temperature 0, otherwise temperature,
// top-k, top-p and min-p filtering and a draw from the request's own seeded generator (the same
// seed gives the same tokens whatever else is batched).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace mx {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

  // REQUIRES: logits non-empty, each finite or -inf (masked), not all -inf.
  int32_t Sample(std::span<const float> logits);

  // Speculative (rejection) sampling of a draft token that was proposed with probability 1
  // (top-1 drafting): the draft is kept with probability p(draft), otherwise the token is drawn
  // from p without the draft, renormalised; so the result is distributed exactly as Sample's,
  // and equals `draft` exactly when the draft is accepted. Greedy: the argmax.
  int32_t SampleSpeculative(std::span<const float> logits, int32_t draft);

  // The distribution Sample draws from (temperature > 0): candidate ids by logit descending
  // (ties: lower id first) and their probabilities, summing to 1.
  struct Candidates {
    std::vector<int32_t> ids;
    std::vector<double> p;
  };
  Candidates Filter(std::span<const float> logits) const;

 private:
  int32_t Draw(const Candidates& c, int32_t exclude);

  SamplingParams params_;
  std::mt19937_64 rng_;
};

// Index of the largest logit (lowest index on ties).
int32_t Argmax(std::span<const float> logits);

}  // namespace mx
