// RequestConstraint: the grammar's mask on a row of logits, and its advance.
#include "engine/request_constraint.h"

#include <cmath>

namespace mx {

RequestConstraint::RequestConstraint(std::shared_ptr<const grammar::CompiledGrammar> g,
                                     int32_t start_after_token)
    : matcher_(std::move(g)), start_after_(start_after_token), active_(start_after_token < 0) {}

void RequestConstraint::Mask(std::span<float> logits) {
  if (!active_) return;
  matcher_.FillMask(&mask_);
  grammar::ApplyTokenMask(mask_, logits);
  for (float x : logits) {
    if (!std::isinf(x) || x > 0) return;
  }
  const grammar::VocabIndex& v = matcher_.vocab();
  for (int32_t id : v.eos_ids()) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = 0.0f;
  }
}

bool RequestConstraint::Accept(int32_t token) {
  if (!active_) {
    active_ = token == start_after_;
    return true;
  }
  return matcher_.AcceptToken(token);
}

}  // namespace mx
