// The scheduler's per-request state, shared by its translation units (scheduler.cpp,
// scheduler_spec.cpp). Internal to the engine.
#pragma once

#include <optional>
#include <vector>

#include "engine/request_constraint.h"
#include "engine/scheduler.h"

namespace mx {

struct Scheduler::Request {
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
  std::optional<StopMatcher> stop;
  GenerationChunk pending;
  std::vector<int32_t> drafts;  // speculative: d_1..d_n to verify after tokens.back()
  std::optional<RequestConstraint> constraint;  // structured output

  explicit Request(const SamplingParams& p) : sampler(p) {}
  int32_t n_output() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - kv_len; }
};

}  // namespace mx
