// The engine's single-threaded core: request state, the waiting queue (fcfs or lpm), admission
// under a KV page budget, chunked prefill mixed with decode in one ForwardBatch, sampling and
// stop checks, retraction when decode runs out of pages, and the radix prefix cache.
//
// One Step():
//   1. aborts: queued requests end at once; running ones release (and cache) their pages;
//   2. decode: every running request with one token left gets a page for it; when none is
//      left even after evicting the cache, the youngest running request is retracted (its
//      computed pages go to the radix cache, it returns to the head of the queue);
//   3. prefill: chunks of requests mid-prefill (oldest first), then new admissions, up to
//      chunked_prefill_size tokens in all (several requests may be mid-prefill);
//   4. one forward; prefill chunks go into the radix cache at once (locked by their request);
//      requests whose chunk reached the end of their tokens sample a token.
// Admission reserves, for every running request, pages for its future tokens estimated as
// new_token_ratio · (max_tokens − generated) (sglang's PrefillAdder; the ratio decays each step
// and rises after a retraction).
// A forward error ends the requests of that batch. When it says the runner is broken
// (IsRunnerFailure, model_runner.h) the scheduler has failed for good: every running and
// waiting request ends with that error in the same step, and every later Step ends at once
// whatever was added.
//
// Thread-safety: none; the engine loop thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/logits_processor.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "kv/page_pool.h"
#include "kv/paged_kv_store.h"
#include "kv/radix_cache.h"
#include "tokenizer/tokenizer.h"

namespace mx {

using Clock = std::chrono::steady_clock;

// Where a request's chunks go (the stream's channel).
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual void Push(GenerationChunk chunk) = 0;
};

struct SchedulerConfig {
  int64_t page_size = 64;
  int64_t n_pages = 0;
  KvCacheDtype kv_dtype = KvCacheDtype::kBf16;
  std::vector<float> kv_scales;  // per layer, or empty (1.0)
  int32_t max_running_requests = 64;
  int64_t chunked_prefill_size = 512;
  bool lpm = false;
  bool disable_radix_cache = false;
  std::vector<int32_t> eos_ids;
  int64_t context_window = 0;
  // Speculative decoding with the MTP layer (0: off): draft up to spec_steps tokens per
  // request and step (a chain, top-1), verify them in the next forward. spec_share_topk: later
  // draft steps reuse the first step's indexer top-k (index_share_for_mtp_iteration).
  int32_t spec_steps = 0;
  bool spec_share_topk = false;
};

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
  int64_t PagesFor(int64_t n_tokens) const;
  const PagePool& pool() const { return pool_; }
  const std::vector<int32_t>& eos_ids() const { return cfg_.eos_ids; }  // immutable
  const RadixCache& radix() const { return radix_; }
  // Tests: the KV store (rows of running requests; sequence id = request id).
  PagedKvStore& kv_store() { return kv_; }
  // Tests: the running requests' tokens (prompt + output) and KV length.
  struct RunningView {
    RequestId id;
    std::vector<int32_t> tokens;
    int64_t kv_len;
  };
  std::vector<RunningView> running_view() const;

 private:
  struct Request;
  using ReqPtr = std::unique_ptr<Request>;

  bool EnsurePages(Request& r, int64_t n_positions);
  void Release(Request& r, bool cache);
  void Retract(size_t running_index);
  // After a prefill chunk: the computed page-aligned prefix goes into the radix cache at once
  // (locked for this request), so requests admitted later share it while this one still runs.
  void CacheUnfinished(Request& r);
  void Finish(Request& r, FinishReason reason, Status error = Status::Ok());
  // A forward of the runner failed with `error`: a broken runner fails the scheduler. Called
  // before the batch's requests end with the error.
  void ForwardFailed(const Status& error);
  void Emit(Request& r, bool final);
  bool TryAdmit(int64_t& budget, std::vector<std::pair<Request*, int64_t>>& batch);
  size_t PickWaiting();
  int64_t Reserved() const;
  // Penalties, min_tokens masks and the draw for r's next token (speculative when draft >= 0).
  int32_t SampleNext(Request& r, std::span<float> logits, int32_t draft);
  // Appends the token (logprobs, stop checks); true when r finished.
  bool AppendToken(Request& r, int32_t token, std::span<const float> logits);
  void ProcessLogits(Request& r, std::span<float> logits);
  int64_t EstimatedTokens(const Request& r) const;  // tokens + spec drafts + expected outputs
  // The forward input of `batch`: each request's next n tokens (its drafts last, with logits on
  // every row).
  ForwardBatch MakeBatch(const std::vector<std::pair<Request*, int64_t>>& batch) const;
  // After a forward wrote n rows of r that are its own tokens: cache, and sample when they
  // reached its end.
  void FinishChunk(Request& r, int64_t n, std::span<float> last_logits);
  void PlainForward(const std::vector<std::pair<Request*, int64_t>>& batch);
  // Speculative decoding (scheduler_spec.cpp): the forward of `batch` with verification of
  // the drafts it carries, then the MTP layer over every row that became final (draft-extend)
  // and the next drafts.
  void SpecForward(const std::vector<std::pair<Request*, int64_t>>& batch);
  int32_t Verify(Request& r, std::span<float> logits, int64_t rows);
  void Draft(const std::vector<std::pair<Request*, int64_t>>& extended, const ForwardOutput& fwd,
             const std::vector<int64_t>& first_row);

  SchedulerConfig cfg_;
  ModelRunner& runner_;
  const tok::Tokenizer* tokenizer_;
  int64_t vocab_;
  PagePool pool_;
  PagedKvStore kv_;
  RadixCache radix_;
  std::deque<ReqPtr> waiting_;
  std::vector<ReqPtr> running_;  // in admission order
  std::vector<RequestId> aborts_;
  uint64_t admit_counter_ = 0;
  double new_token_ratio_;
  EngineStats stats_;
  Status failure_;
  std::function<void(const Status&)> on_failure_;
};

}  // namespace mx
