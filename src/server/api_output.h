// The shape one API gives a single-choice generation's output (Anthropic Messages, OpenAI
// Responses): the events that open a stream, each delta of the choice's output, the heartbeat
// of a quiet stream, the end, and the whole answer of a request that did not stream.
// Streaming and non-streaming requests push the same deltas through the same object, so the
// two give the same content by construction.
//
// Thread-safety: one ApiOutput per request, used by the request's handler thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/choice_output.h"

namespace mx::server {

// How a single-choice generation ended.
struct GenerationResult {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;     // prompt tokens served from the prefix cache
  int64_t reasoning_tokens = 0;  // completion tokens inside the reasoning
  const ChoiceDelta* total = nullptr;
  std::optional<ApiError> error;  // the engine failed the request
};

class ApiOutput {
 public:
  virtual ~ApiOutput() = default;
  // SSE bytes sent when a stream opens (before the first token).
  virtual std::string StreamStart() = 0;
  // Records one delta; returns the SSE bytes a stream sends for it ("" for none).
  virtual std::string Delta(const ChoiceDelta& d) = 0;
  // What a quiet stream sends every --sse-keepalive-interval (a long prefill).
  virtual std::string Heartbeat() { return ": keep-alive\n\n"; }
  // Called once when the generation has ended, before StreamEnd or Final.
  virtual void Finish(const GenerationResult& r) = 0;
  // SSE bytes that close a stream. REQUIRES: Finish called.
  virtual std::string StreamEnd(const GenerationResult& r) = 0;
  // The answer of a request that did not stream. REQUIRES: Finish called, no error.
  virtual nlohmann::ordered_json Final(const GenerationResult& r) = 0;
};

}  // namespace mx::server
