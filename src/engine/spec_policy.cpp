// SpecPolicy: fixed drafts, or SpecChooser's (auto), decided at the scheduler's two points.
#include "engine/spec_policy.h"

#include <algorithm>

namespace mx {

SpecPolicy::SpecPolicy(int32_t max_steps, bool automatic, SpecChooserOptions chooser,
                       std::function<int32_t(int32_t, int64_t)> schedule)
    : max_steps_(max_steps), schedule_(std::move(schedule)) {
  if (max_steps_ > 0 && automatic) {
    chooser.max_steps = max_steps_;
    chooser_.emplace(chooser);
  }
}

bool SpecPolicy::WantMtpRows() const {
  return !chooser_ || schedule_ != nullptr || chooser_->KeepMtp(1);
}

SpecPolicy::Drafts SpecPolicy::Next(int64_t decoding) {
  Drafts d{max_steps_, decoding, true};
  if (chooser_) {
    d.steps = decoding > 0 ? chooser_->Choose(decoding) : 0;
    // A re-probe only re-measures acceptance (its costs are known): one request drafts, the
    // others neither catch their MTP layers up nor verify drafts.
    if (decoding > 0 && chooser_->last().reprobe && !schedule_) d.drafters = 1;
    d.keep_mtp = d.steps > 0 || chooser_->KeepMtp(std::max<int64_t>(decoding, 1));
    if (schedule_ && decoding > 0) {
      d.steps = std::clamp(schedule_(d.steps, decode_steps_), 0, max_steps_);
    }
    d.keep_mtp = d.keep_mtp || schedule_ != nullptr;
  }
  decode_steps_ += decoding > 0 ? 1 : 0;
  return d;
}

void SpecPolicy::ObserveDecodeStep(int64_t rows, double forward_seconds, int64_t tokens,
                                   double other_seconds) {
  if (!chooser_) return;
  chooser_->ObserveTarget(rows, forward_seconds);
  chooser_->ObserveOverhead(tokens, other_seconds);
}

void SpecPolicy::ObserveMtp(int64_t rows, double seconds) {
  if (chooser_) chooser_->ObserveMtp(rows, seconds);
}

void SpecPolicy::ObserveVerify(int32_t proposed, int32_t accepted) {
  if (chooser_) chooser_->ObserveVerify(proposed, accepted);
}

void SpecPolicy::FillStats(SpeculativeStats* s) const {
  s->automatic = chooser_.has_value();
  if (chooser_) {
    const SpecChooser::Decision& d = chooser_->last();
    s->steps_chosen = d.steps;
    s->probe = d.probe;
    s->estimate_tokens_per_s = d.tokens_per_s;
    s->estimate_off_tokens_per_s = d.off_tokens_per_s;
    s->estimate_accept_length = d.accept_length;
  } else {
    s->steps_chosen = max_steps_;
  }
}

}  // namespace mx
