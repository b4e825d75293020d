// How many MTP drafts each decode step gets, behind one object the scheduler calls at two
// points of a step: before planning it (WantMtpRows: may a cached prefix whose MTP-layer rows
// are missing be reused?) and once the step's verifies are known (Next: the drafts of the next
// decode step, how many requests draft, whether the MTP layer is kept up). Fixed
// `--speculative-num-steps N` answers N every step; `auto` asks its SpecChooser
// (spec_chooser.h), fed the times and verify outcomes the scheduler measures (Observe*), and
// tests may replace its choice with SchedulerConfig::spec_schedule. Its state lives here, not in
// the requests, the cache manager or the planner.
//
// Thread-safety: none (the engine loop thread owns it, through the scheduler).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "engine/engine.h"
#include "engine/spec_chooser.h"

namespace mx {

class SpecPolicy {
 public:
  // `max_steps` 0: no speculation (every call is a no-op). `automatic`: a SpecChooser over
  // 0..max_steps with `chooser` options; `schedule` (tests, auto only): the drafts of decode
  // step `step` are schedule(chosen, step), clamped to [0, max_steps].
  SpecPolicy(int32_t max_steps, bool automatic, SpecChooserOptions chooser,
             std::function<int32_t(int32_t chosen, int64_t step)> schedule);

  // Point 1, before planning a step: whether a cached prefix is reused only where its MTP-layer
  // rows were written (false while drafts were just measured not to pay: the prompt prefills
  // without the MTP layer anyway).
  bool WantMtpRows() const;

  // Point 2, after a step's verifies (its acceptance is known), for the next decode step of
  // `decoding` requests (0: none decodes).
  struct Drafts {
    int32_t steps = 0;     // drafts per decoding request (0: the MTP layer is not run for them)
    int64_t drafters = 0;  // how many of the decoding requests draft (a re-probe lets one)
    bool keep_mtp = true;  // prefill chunks go through the MTP layer, skipped rows are kept
  };
  Drafts Next(int64_t decoding);

  // Measurements of the step, for auto (no-ops otherwise): a target forward over `rows` rows of
  // decoding requests only, the step's time outside its forwards for `tokens` emitted tokens,
  // one MTP pass, and one request's verify.
  void ObserveDecodeStep(int64_t rows, double forward_seconds, int64_t tokens,
                         double other_seconds);
  void ObserveMtp(int64_t rows, double seconds);
  void ObserveVerify(int32_t proposed, int32_t accepted);

  // The drafts chosen for the last step and auto's estimates, into `s`.
  void FillStats(SpeculativeStats* s) const;
  bool automatic() const { return chooser_.has_value(); }

 private:
  int32_t max_steps_;
  std::optional<SpecChooser> chooser_;
  std::function<int32_t(int32_t, int64_t)> schedule_;
  int64_t decode_steps_ = 0;  // decode steps drafted for (schedule_'s step)
};

}  // namespace mx
