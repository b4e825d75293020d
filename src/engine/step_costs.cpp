// StepCosts: running averages of a decode step and of a prefill token's marginal cost.
#include "engine/step_costs.h"

#include <algorithm>
#include <cmath>

namespace mx {

namespace {
// Weight of a new observation: the average follows the last few steps (a prompt's per-token
// cost rises with its context from chunk to chunk; a step's time jitters by a few ms).
constexpr double kWeight = 0.3;

void Update(double& avg, double x) { avg = avg < 0.0 ? x : avg + kWeight * (x - avg); }
}  // namespace

void StepCosts::Observe(int64_t decode_rows, int64_t prefill_tokens, double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds)) return;
  if (prefill_tokens <= 0) {
    if (decode_rows > 0) Update(decode_s_, seconds);
    return;
  }
  const double n = static_cast<double>(prefill_tokens);
  if (decode_rows == 0) {
    Update(token_s_, seconds / n);
  } else if (decode_s_ >= 0.0) {
    Update(token_s_, std::max(0.0, seconds - decode_s_) / n);
  }
}

int64_t StepCosts::PrefillBudget(double target_seconds, int64_t min_tokens,
                                 int64_t max_tokens) const {
  min_tokens = std::min(min_tokens, max_tokens);
  if (decode_s_ < 0.0 || token_s_ < 0.0) return min_tokens;
  const double n = (target_seconds - decode_s_) / std::max(token_s_, 1e-12);
  if (!(n > static_cast<double>(min_tokens))) return min_tokens;
  if (n >= static_cast<double>(max_tokens)) return max_tokens;
  return static_cast<int64_t>(n);
}

}  // namespace mx
