// OutputProcessor: penalties, masks and the draw; logprobs, timing and the stop checks.
#include "engine/output_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mx {

namespace {
bool Contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

OutputProcessor::OutputProcessor(const SchedulerConfig& cfg, int64_t vocab_size,
                                 const tok::Tokenizer* tokenizer)
    : eos_ids_(cfg.eos_ids),
      context_window_(cfg.context_window),
      vocab_(vocab_size),
      tokenizer_(tokenizer) {}

void OutputProcessor::Init(ScheduledRequest& r) const {
  const GenerationRequest& q = r.req;
  if (q.repetition_penalty != 1.0f) {
    r.penalty.seen.assign(vocab_, 0);
    for (int32_t t : q.prompt) r.penalty.seen[t] = 1;
  }
  if (tokenizer_ != nullptr) r.text.emplace(*tokenizer_, q.stop);
  if (q.constraint) {
    r.constraint.emplace(q.constraint, q.constraint_after_token, q.constraint_repeats);
  }
  r.in_reasoning = q.think_end_token >= 0 && q.reasoning_open;
}

int32_t OutputProcessor::Sample(ScheduledRequest& r, std::span<float> logits, int32_t draft) const {
  const GenerationRequest& q = r.req;
  ApplyPenalties(q, r.penalty, logits);
  if (r.n_output() < q.min_tokens) {
    MaskTokens(q.stop_token_ids, logits);
    if (!q.ignore_eos) MaskTokens(eos_ids_, logits);
  }
  if (r.constraint) r.constraint->Mask(logits);
  if (r.in_reasoning && q.thinking_budget >= 0 && r.reasoning_tokens >= q.thinking_budget &&
      q.think_end_token < static_cast<int32_t>(logits.size())) {
    // The budget is spent: the model's own end of thinking is the only token left.
    const float keep = logits[q.think_end_token];
    std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
    logits[q.think_end_token] = std::isfinite(keep) ? keep : 0.0f;
  }
  return draft >= 0 ? r.sampler.SampleSpeculative(logits, draft) : r.sampler.Sample(logits);
}

std::optional<OutputProcessor::Ending> OutputProcessor::Append(
    ScheduledRequest& r, int32_t token, std::span<const float> logits) const {
  const GenerationRequest& q = r.req;
  if (r.constraint && !r.constraint->Accept(token)) {
    return Ending{FinishReason::kAbort,
                  Internal("request {}: token {} does not fit its output constraint", r.id, token)};
  }
  if (q.top_logprobs >= 0) {
    std::vector<TokenLogprob> top;
    const float lp = ComputeLogprob(logits, token, q.top_logprobs, &top);
    r.pending.logprobs.push_back({token, lp});
    if (q.top_logprobs > 0) r.pending.top.push_back(std::move(top));
  }
  const Clock::time_point now = Clock::now();
  if (!r.first_token) r.first_token = now;
  r.tokens.push_back(token);
  ++r.penalty.output_counts[token];
  if (!r.penalty.seen.empty()) r.penalty.seen[token] = 1;
  r.pending.tokens.push_back(token);
  r.pending.token_times.push_back(r.SecondsTo(now));
  if (q.think_end_token >= 0) {
    if (r.in_reasoning) {
      if (token == q.think_end_token || token == q.tool_call_token) {
        r.in_reasoning = false;
      } else {
        ++r.reasoning_tokens;
      }
    } else if (r.n_output() == 1 && token == q.think_start_token && r.reasoning_tokens == 0) {
      r.in_reasoning = true;
    }
  }

  const int32_t n_out = r.n_output();
  if (n_out >= q.min_tokens &&
      (Contains(q.stop_token_ids, token) || (!q.ignore_eos && Contains(eos_ids_, token)))) {
    // The stop token is not decoded: it is not shown.
    if (r.text) r.pending.text.emplace_back();
    r.pending.matched_stop_token = token;
    return Ending{FinishReason::kStop, Status::Ok()};
  }
  const bool constraint_done = r.constraint && r.constraint->Terminated();
  if (r.text) {
    // A token that completes the constraint ends the request unshown (unless a stop string
    // matches first): its text is dropped and the detokenizer kept as it was before it.
    std::optional<OutputText> before;
    if (constraint_done) before = *r.text;
    OutputText::Piece p = r.text->Push(token);
    if (p.stop && n_out >= q.min_tokens) {
      r.pending.text.push_back(std::move(p.text));
      r.pending.matched_stop = p.stop->stop;
      r.pending.stop_trim_bytes = p.stop->trim_bytes;
      return Ending{FinishReason::kStop, Status::Ok()};
    }
    if (constraint_done) {
      r.text = std::move(before);
      r.pending.text.emplace_back();
    } else {
      r.pending.text.push_back(std::move(p.text));
    }
  }
  if (constraint_done) {  // complete (even with ignore_eos)
    r.pending.matched_stop_token = token;
    return Ending{FinishReason::kStop, Status::Ok()};
  }
  if (n_out >= q.max_tokens || static_cast<int64_t>(r.tokens.size()) >= context_window_) {
    return Ending{FinishReason::kLength, Status::Ok()};
  }
  return std::nullopt;
}

}  // namespace mx
