// The scheduler's configuration and per-request state, shared by its parts: the scheduler
// (scheduler.cpp, scheduler_spec.cpp), the cache manager, the batch planner and the output
// processor. Internal to the engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/logits_processor.h"
#include "engine/output_text.h"
#include "engine/request_constraint.h"
#include "engine/sampler.h"
#include "engine/spec_chooser.h"
#include "kv/paged_kv_store.h"
#include "kv/radix_cache.h"

namespace mx {

using Clock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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
  // While requests decode, a step's prefill tokens are cut to what ends the step within this
  // many seconds by the measured costs (StepCosts), the step's first chunk at least
  // min_prefill_chunk (so a prompt progresses when the decode rows alone fill the gap); 0: off
  // (every step takes chunked_prefill_size).
  double max_decode_gap_s = 0.0;
  int64_t min_prefill_chunk = 8;
  bool lpm = false;
  bool disable_radix_cache = false;
  std::vector<int32_t> eos_ids;
  int64_t context_window = 0;
  // Structured-output masks for the rows sampled after a forward are computed on a thread of
  // their own while it runs (MaskPrefetcher). That pays only with a core the forward's pool
  // leaves idle: where the pool fills every core, the extra thread takes one from the forward's
  // workers mid-step and slows every barrier, so the engine turns this off and the masks are
  // computed at sampling (docs/performance.md, structured output).
  bool overlap_masks = true;
  // Speculative decoding with the MTP layer (0: off): draft up to spec_steps tokens per
  // request and step (a chain, top-1), verify them in the next forward. spec_share_topk: later
  // draft steps reuse the first step's indexer top-k (index_share_for_mtp_iteration).
  int32_t spec_steps = 0;
  bool spec_share_topk = false;
  // --speculative-num-steps auto: spec_steps is the most drafts, and a SpecChooser
  // (spec_chooser.h) picks 0..spec_steps for every decode step from measured costs and
  // acceptance. spec_max_lag: how many positions a request's MTP layer may fall behind while
  // auto runs without drafts (their target hidden states are kept, hidden_size floats each, and
  // written when drafting resumes); beyond, that request drafts no more.
  bool spec_auto = false;
  int64_t spec_max_lag = 256;
  SpecChooserOptions spec_chooser;
  // Tests: with spec_auto, the drafts of decode step `step` (counted from 0) are
  // spec_schedule(chosen, step), clamped to [0, spec_steps], instead of the chooser's `chosen`.
  std::function<int32_t(int32_t chosen, int64_t step)> spec_schedule;
};

struct ScheduledRequest {
  RequestId id = 0;
  GenerationRequest req;
  std::shared_ptr<ChunkSink> sink;
  Clock::time_point submitted;
  std::optional<Clock::time_point> admitted, first_token;
  std::vector<int32_t> tokens;  // prompt + output
  int32_t n_prompt = 0;
  int64_t kv_len = 0;  // positions whose KV rows are written
  RadixCache::Node* locked = nullptr;
  int64_t cached_tokens = 0;
  bool done = false;
  Sampler sampler;
  PenaltyState penalty;
  std::optional<OutputText> text;  // with a tokenizer: the output decoded once, stop strings
  GenerationChunk pending;
  std::vector<int32_t> drafts;  // speculative: d_1..d_n to verify after tokens.back()
  // Speculative: positions whose MTP-layer KV row is written (< mtp_len), and the target's final
  // hidden states of positions mtp_len..kv_len-1 ([kv_len - mtp_len, D]) kept to write theirs
  // when drafting resumes. A request with fewer kept rows than that drafts no more.
  int64_t mtp_len = 0;
  std::vector<float> mtp_hidden;
  std::optional<RequestConstraint> constraint;  // structured output
  // The thinking budget's count (GenerationRequest::thinking_budget): inside the reasoning now,
  // and its tokens so far.
  bool in_reasoning = false;
  int32_t reasoning_tokens = 0;

  explicit ScheduledRequest(const SamplingParams& p) : sampler(p) {}
  int64_t seq() const { return static_cast<int64_t>(id); }  // its KV sequence id
  int32_t n_output() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - kv_len; }
  // Seconds from submission to t.
  double SecondsTo(Clock::time_point t) const {
    return std::chrono::duration<double>(t - submitted).count();
  }
};

// One forward's work: each request and its number of rows (tokens it already has, then its
// drafts).
using ScheduledBatch = std::vector<std::pair<ScheduledRequest*, int64_t>>;

}  // namespace mx
