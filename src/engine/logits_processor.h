// Per-request logit edits before sampling and the log-probabilities reported back:
//   repetition_penalty (HF/CTRL: over prompt and output tokens, positive logits divided,
//   negative multiplied), frequency_penalty · count and presence_penalty (OpenAI: over output
//   tokens), and the min_tokens mask (EOS and stop token ids get -inf until enough tokens).
// Legend: V vocab_size.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace mx {

struct PenaltyState {
  std::unordered_map<int32_t, int32_t> output_counts;  // token → times generated
  std::vector<uint8_t> seen;                           // [V] in prompt or output (repetition)
};

// Edits logits [V] in place.
void ApplyPenalties(const GenerationRequest& req, const PenaltyState& st, std::span<float> logits);
// Sets logits [V] of `ids` to -inf.
void MaskTokens(std::span<const int32_t> ids, std::span<float> logits);

// log_softmax(logits)[token], and when n > 0 the top-n (descending, ties to the lower id).
float ComputeLogprob(std::span<const float> logits, int32_t token, int32_t n,
                     std::vector<TokenLogprob>* top);

}  // namespace mx
