// What the scheduler does with a request's logits row: the output processor.
//   Sample: penalties (logits_processor.h), the min_tokens mask of EOS and stop token ids, the
//     output constraint's mask (structured output), then the draw (speculative when a draft is
//     given: rejection sampling against it, sampler.h).
//   Append: the token joins the request (log-probabilities, timing, the pending chunk), then
//     its text (the request's one detokenization, output_text.h), then the stop checks in
//     order: a stop token id or EOS (after min_tokens), a stop string (the chunk says how many
//     bytes of the text sent to trim), the constraint's end, and max_tokens / the context
//     window. It says how the request ends; the scheduler ends it.
//
// Thread-safety: none; the engine loop thread owns it (through the scheduler).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "base/status.h"
#include "engine/scheduler_request.h"
#include "tokenizer/tokenizer.h"

namespace mx {

class OutputProcessor {
 public:
  // `tokenizer` may be null (no output text; stop strings are then ignored).
  OutputProcessor(const SchedulerConfig& cfg, int64_t vocab_size, const tok::Tokenizer* tokenizer);

  // Sets up r's output state from r.req: penalty bookkeeping, output text, constraint.
  void Init(ScheduledRequest& r) const;
  // Edits logits [V] (penalties, masks) and draws r's next token; speculative when draft >= 0.
  int32_t Sample(ScheduledRequest& r, std::span<float> logits, int32_t draft) const;

  struct Ending {
    FinishReason reason;
    Status error;
  };
  // Appends `token` (sampled from logits [V]) to r; how r ends with it, if it does.
  std::optional<Ending> Append(ScheduledRequest& r, int32_t token,
                               std::span<const float> logits) const;

 private:
  std::vector<int32_t> eos_ids_;
  int64_t context_window_;
  int64_t vocab_;
  const tok::Tokenizer* tokenizer_;
};

}  // namespace mx
