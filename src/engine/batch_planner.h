// Which requests run in the next forward, and how many rows each: the batch planner.
//   decode: every running request with one token left gets the pages for it (and for its
//     speculative drafts when those pages can be had, or the drafts are dropped); when even
//     evicting the cache leaves none, the youngest running request is retracted (its computed
//     pages go to the radix cache, it returns to the head of the queue);
//   prefill: chunks of requests mid-prefill (oldest first), then new admissions (fcfs, or
//     longest cached prefix first with lpm), up to chunked_prefill_size tokens in all; with
//     decode rows in the step and max_decode_gap_s set, also up to what the measured StepCosts
//     say ends the step within that gap (the decode rows' cost, then each chunk priced at its
//     own context), the step's first chunk at least min_prefill_chunk, so a long prompt can
//     neither starve the streams nor stall; a chunk shrinks to the pages that can be had
//     (CacheManager::Fit).
// Admission reserves, for every running request, pages for its future tokens estimated as
// new_token_ratio · (max_tokens − generated) (sglang's PrefillAdder; the ratio decays each
// step and rises after a retraction).
//
// The planner works on the scheduler's queues; it never ends a request.
// Thread-safety: none; the engine loop thread owns it (through the scheduler).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/cache_manager.h"
#include "engine/scheduler_request.h"
#include "engine/step_costs.h"

namespace mx {

class BatchPlanner {
 public:
  using ReqPtr = std::unique_ptr<ScheduledRequest>;

  BatchPlanner(const SchedulerConfig& cfg, CacheManager& cache, std::deque<ReqPtr>& waiting,
               std::vector<ReqPtr>& running, EngineStats& stats, const StepCosts& costs);

  // What the last Plan() scheduled: decode rows (requests emitting a token) and prompt tokens.
  struct Shape {
    int64_t decode_rows = 0;
    int64_t prefill_tokens = 0;
    double prefill_context = 0.0;  // the prompt tokens' mean position (StepCosts::MidContext)
  };

  // The next forward's rows: decode first, then prefill chunks. Empty when nothing can run
  // (the caller decides how to get unstuck). `want_mtp_rows`: admissions reuse a cached prefix
  // only where its MTP-layer rows were written (CacheManager::LockPrefix).
  ScheduledBatch Plan(bool want_mtp_rows = true);
  // Moves running[i] back to the head of the queue, caching its computed pages.
  void Retract(size_t running_index);
  // After a step that ran: the reservation ratio decays.
  void StepDone();
  Shape last_shape() const { return shape_; }

 private:
  ScheduledBatch PlanDecode();
  // What the step's prompt chunks may still take: tokens, and with `paced` (decode rows in the
  // step, a gap set) seconds of predicted step time.
  struct PrefillBudget {
    int64_t tokens = 0;
    bool paced = false;
    double seconds = 0.0;
    bool chunked = false;  // a chunk was taken this step
    bool Open() const { return tokens > 0 && (!paced || seconds > 0.0 || !chunked); }
  };
  PrefillBudget MakePrefillBudget(int64_t decode_rows) const;
  // The tokens (at most `want`) a chunk starting at position `start` may have under `budget`.
  int64_t ChunkLimit(const PrefillBudget& budget, int64_t start, int64_t want) const;
  // Schedules r's chunk of at most ChunkLimit tokens (shrunk to the pages that can be had) and
  // charges it to `budget`.
  void AddChunk(ScheduledRequest& r, PrefillBudget& budget, ScheduledBatch& batch);
  void PlanPrefill(ScheduledBatch& batch, bool want_mtp_rows);
  // Admits one waiting request when its pages fit (with a first chunk when pages allow);
  // false when it does not fit.
  bool TryAdmit(PrefillBudget& budget, ScheduledBatch& batch, bool want_mtp_rows);
  size_t PickWaiting();
  // Pages the running requests are expected to need beyond the ones they hold.
  int64_t Reserved() const;
  int64_t EstimatedTokens(const ScheduledRequest& r) const;  // tokens + drafts + expected outputs
  // Grows r's pages to cover n_positions when it can; false (and nothing evicted) when not.
  bool TryGrow(ScheduledRequest& r, int64_t n_positions);
  // The prefill chunk r gets: at most n tokens, shrunk to the pages that can be had, with
  // its pages grown; 0 when none.
  int64_t GrowChunk(ScheduledRequest& r, int64_t n);

  const SchedulerConfig& cfg_;
  CacheManager& cache_;
  std::deque<ReqPtr>& waiting_;
  std::vector<ReqPtr>& running_;  // in admission order
  EngineStats& stats_;
  const StepCosts& costs_;
  double new_token_ratio_;
  Shape shape_;
};

}  // namespace mx
