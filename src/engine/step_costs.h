// How long a step takes, learned from the steps that ran, so the batch planner can size a
// prefill chunk that keeps decoding streams on pace (EngineOptions::max_decode_gap_ms).
//
// Model: a step with decode rows and n prefill tokens costs about D + c·n, where D is what the
// decode rows alone cost (the weights are read once per forward whatever the rows, so D holds
// the forward's fixed cost) and c the marginal cost of a prefill token at the current context
// (attention grows with it, so c is a running average that follows the prompt being
// prefilled). D is the running average of decode-only steps; c that of (t − D)/n over mixed
// steps, and of t/n over prefill-only steps (an overestimate by the fixed cost over n: on the
// safe side). Both are exponential averages over the last few steps; the first observation of
// each seeds it.
//
// Pure logic: the scheduler times each whole step (plan, forward, sampling: what a stream sees
// between two tokens) and reports it; this never reads a clock.
// Thread-safety: none (the engine loop thread owns it).
#pragma once

#include <cstdint>

namespace mx {

class StepCosts {
 public:
  // A step that ran `decode_rows` decode rows (requests emitting a token, drafts included) and
  // `prefill_tokens` prompt tokens in `seconds`.
  void Observe(int64_t decode_rows, int64_t prefill_tokens, double seconds);

  // The prefill tokens a step with decode rows may add and still end within `target_seconds`:
  // (target − D) / c, clamped to [min_tokens, max_tokens]; before both D and c were observed,
  // min_tokens (a small chunk measures c without risking a long step).
  int64_t PrefillBudget(double target_seconds, int64_t min_tokens, int64_t max_tokens) const;

  // The running averages (negative: not observed yet).
  double decode_seconds() const { return decode_s_; }
  double prefill_token_seconds() const { return token_s_; }

 private:
  double decode_s_ = -1.0;
  double token_s_ = -1.0;
};

}  // namespace mx
