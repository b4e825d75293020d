// The engine's single-threaded core: one Step() takes requests from the queue to the forward
// and their tokens to their streams. Its parts, in the order a request meets them:
//   BatchPlanner (batch_planner.h): admission under a KV page budget, decode rows, chunked
//     prefill, retraction when decode runs out of pages;
//   CacheManager (cache_manager.h): the page pool, the radix prefix cache, the page tables;
//   the forward (ModelRunner), plain or speculative (scheduler_spec.cpp: verify, draft);
//   OutputProcessor (output_processor.h): penalties, masks, sampling, logprobs, stop checks;
//   and here: the request's end (stats, pages released or cached, the final chunk).
//
// One Step():
//   1. aborts: queued requests end at once; running ones release (and cache) their pages;
//   2. plan: decode rows, then prefill chunks and admissions (BatchPlanner::Plan); when
//      nothing can run, the youngest running request is retracted to make room;
//   3. one forward; prefill chunks go into the radix cache at once (locked by their request);
//      requests whose chunk reached the end of their tokens sample a token.
// A forward error ends the requests of that batch. When it says the runner is broken
// (IsRunnerFailure, model_runner.h) the scheduler has failed for good: every running and
// waiting request ends with that error in the same step, and every later Step ends at once
// whatever was added.
//
// Thread-safety: none; the engine loop thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/batch_planner.h"
#include "engine/cache_manager.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/request_constraint.h"
#include "engine/scheduler_request.h"
#include "engine/spec_policy.h"
#include "tokenizer/tokenizer.h"

namespace mx {

class Scheduler {
 public:
  // `tokenizer` may be null (stop strings are then ignored).
  Scheduler(SchedulerConfig cfg, ModelRunner& runner, const tok::Tokenizer* tokenizer);
  ~Scheduler();

  // REQUIRES: the request passed the engine's validation (see Engine::Submit).
  void Add(RequestId id, GenerationRequest req, std::shared_ptr<ChunkSink> sink,
           Clock::time_point submitted);
  void Abort(RequestId id);          // takes effect at the next Step
  void AbortAll(const Status& why);  // now
  int64_t FlushCache();              // evicts every unlocked cached page; returns pages freed

  // One iteration; false when there was nothing to run.
  bool Step();
  bool idle() const { return waiting_.empty() && running_.empty() && aborts_.empty(); }
  // Ok, or the runner error that failed the scheduler for good (see above).
  const Status& failure() const { return failure_; }
  // Called once, when the scheduler fails, before any request ends with the error.
  void set_on_failure(std::function<void(const Status&)> f) { on_failure_ = std::move(f); }

  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t running() const { return static_cast<int64_t>(running_.size()); }
  EngineStats stats() const;
  // Pages a request of n tokens (prompt + max_tokens) needs at most.
  int64_t PagesFor(int64_t n_tokens) const { return cache_.PagesFor(n_tokens); }
  const PagePool& pool() const { return cache_.pool(); }
  const std::vector<int32_t>& eos_ids() const { return cfg_.eos_ids; }  // immutable
  const RadixCache& radix() const { return cache_.radix(); }
  // Tests: the KV store (rows of running requests; sequence id = request id).
  PagedKvStore& kv_store() { return cache_.kv(); }
  // Tests: the running requests' tokens (prompt + output) and KV length.
  struct RunningView {
    RequestId id;
    std::vector<int32_t> tokens;
    int64_t kv_len;
    int64_t mtp_len;  // speculative: positions whose MTP-layer KV row is written
  };
  std::vector<RunningView> running_view() const;

 private:
  using Request = ScheduledRequest;
  using ReqPtr = std::unique_ptr<Request>;

  void Finish(Request& r, FinishReason reason, Status error = Status::Ok());
  // A forward of the runner failed with `error`: a broken runner fails the scheduler. Called
  // before the batch's requests end with the error.
  void ForwardFailed(const Status& error);
  void Emit(Request& r, bool final);
  // Penalties, min_tokens masks and the draw for r's next token (speculative when draft >= 0).
  int32_t SampleNext(Request& r, std::span<float> logits, int32_t draft);
  // Appends the token (logprobs, stop checks); true when r finished.
  bool AppendToken(Request& r, int32_t token, std::span<const float> logits);
  void ProcessLogits(Request& r, std::span<float> logits);
  // The forward input of `batch`: each request's next n tokens (its drafts last, with logits on
  // every row).
  ForwardBatch MakeBatch(const ScheduledBatch& batch) const;
  // After a forward wrote n rows of r that are its own tokens: cache, and sample when they
  // reached its end.
  void FinishChunk(Request& r, int64_t n, std::span<float> last_logits);
  // With a core to spare (SchedulerConfig::overlap_masks), starts computing the masks of every
  // row of `batch` sampled after its forward: they depend only on tokens already accepted and
  // on the drafts. Wait on prefetch_ before touching those requests again.
  void StartMaskPrefetch(const ScheduledBatch& batch);
  void PlainForward(const ScheduledBatch& batch);
  // Speculative decoding (scheduler_spec.cpp): the forward of `batch` with verification of
  // the drafts it carries, then the MTP layer over every row that became final (draft-extend)
  // and the next drafts.
  void SpecForward(const ScheduledBatch& batch);
  int32_t Verify(Request& r, std::span<float> logits, int64_t rows);
  // Returns the seconds spent in MTP passes.
  double Draft(const ScheduledBatch& extended, const ForwardOutput& fwd,
               const std::vector<int64_t>& first_row);
  // How many drafts r may have for its next verify (limits of max_tokens, context and pages).
  int64_t DraftLimit(Request& r, int64_t steps);

  SchedulerConfig cfg_;
  ModelRunner& runner_;
  const tok::Tokenizer* tokenizer_;
  int64_t vocab_;
  CacheManager cache_;
  OutputProcessor output_;
  std::deque<ReqPtr> waiting_;
  std::vector<ReqPtr> running_;  // in admission order
  std::vector<RequestId> aborts_;
  EngineStats stats_;
  SpecPolicy spec_;          // how many drafts each decode step gets (fixed or auto)
  StepCosts step_costs_;     // each step's time, for the planner's prefill budget
  BatchPlanner planner_;     // over cache_, waiting_, running_, stats_, step_costs_ (above it)
  MaskPrefetcher prefetch_;  // structured-output masks computed during the forward
  Status failure_;
  std::function<void(const Status&)> on_failure_;
};

}  // namespace mx
