// A request's structured-output constraint inside the engine: masks each row of logits to the
// tokens its grammar allows and advances with each emitted token. Speculative drafts need
// nothing more: verify samples row by row, advancing after each accepted token, so a draft the
// grammar forbids has probability 0 and is rejected there (the chain stops at the first
// violation). With a start token (GLM's </think> when reasoning is on), everything up to and
// including it is left free and the grammar applies to the answer after it.
//
// Thread-safety: owned by the scheduler's request (the engine loop thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/token_mask.h"

namespace mx {

class RequestConstraint {
 public:
  RequestConstraint(std::shared_ptr<const grammar::CompiledGrammar> g, int32_t start_after_token);

  // Sets every logit the grammar forbids to -inf (nothing before the start token). Should
  // nothing be left (min_tokens masked the EOS that alone completes the grammar), the
  // grammar's EOS ids are let through: ending valid beats a token past the grammar.
  void Mask(std::span<float> logits);
  // Advances by an emitted token; false when it breaks the grammar (a token drawn under Mask
  // never does).
  bool Accept(int32_t token);
  // The grammar took its EOS: the output is complete and the request must stop.
  bool Terminated() const { return matcher_.Terminated(); }
  bool active() const { return active_; }

 private:
  grammar::TokenMatcher matcher_;
  int32_t start_after_;
  bool active_;
  grammar::TokenBitmask mask_;
};

}  // namespace mx
