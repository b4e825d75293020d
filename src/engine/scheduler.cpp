// Scheduler: the step (aborts, plan, forward, outputs) and the end of a request.
#include "engine/scheduler.h"

#include <algorithm>

#include "base/check.h"
#include "base/log.h"

namespace mx {

Scheduler::Scheduler(SchedulerConfig cfg, ModelRunner& runner, const tok::Tokenizer* tokenizer)
    : cfg_(std::move(cfg)),
      runner_(runner),
      tokenizer_(tokenizer),
      vocab_(runner.config().vocab_size),
      cache_(runner.config(), cfg_),
      output_(cfg_, vocab_, tokenizer_),
      spec_(cfg_.spec_steps, cfg_.spec_auto, cfg_.spec_chooser, cfg_.spec_schedule),
      planner_(cfg_, cache_, waiting_, running_, stats_, step_costs_) {
  if (cfg_.spec_steps > 0) stats_.spec.steps_histogram.assign(cfg_.spec_steps + 1, 0);
}

Scheduler::~Scheduler() { AbortAll(Status(StatusCode::kAborted, "the engine was destroyed")); }

void Scheduler::Add(RequestId id, GenerationRequest req, std::shared_ptr<ChunkSink> sink,
                    Clock::time_point submitted) {
  auto r = std::make_unique<Request>(req.sampling);
  r->id = id;
  r->sink = std::move(sink);
  r->submitted = submitted;
  r->tokens = req.prompt;
  r->n_prompt = static_cast<int32_t>(req.prompt.size());
  r->req = std::move(req);
  output_.Init(*r);
  waiting_.push_back(std::move(r));
}

void Scheduler::Abort(RequestId id) { aborts_.push_back(id); }

void Scheduler::ForwardFailed(const Status& error) {
  if (!failure_.ok() || !IsRunnerFailure(error)) return;
  failure_ = error;
  if (on_failure_) on_failure_(error);
}

void Scheduler::AbortAll(const Status& why) {
  for (auto& r : running_) Finish(*r, FinishReason::kAbort, why);
  for (auto& r : waiting_) Finish(*r, FinishReason::kAbort, why);
  running_.clear();
  waiting_.clear();
  aborts_.clear();
}

int64_t Scheduler::FlushCache() { return cache_.Flush(); }

void Scheduler::Emit(Request& r, bool final) {
  if (!final && r.pending.tokens.empty()) return;
  r.sink->Push(std::move(r.pending));
  r.pending = GenerationChunk();
}

void Scheduler::Finish(Request& r, FinishReason reason, Status error) {
  if (r.done) return;
  const Clock::time_point now = Clock::now();
  GenerationChunk& c = r.pending;
  c.finish = reason;
  c.error = std::move(error);
  c.prompt_tokens = r.n_prompt;
  c.completion_tokens = r.n_output();
  c.cached_tokens = static_cast<int32_t>(r.cached_tokens);
  c.queue_seconds = r.SecondsTo(r.admitted.value_or(now));
  c.ttft_seconds = r.first_token ? r.SecondsTo(*r.first_token) : 0.0;
  c.e2e_seconds = r.SecondsTo(now);
  if (r.text && c.matched_stop.empty()) c.text_tail = r.text->Finish();
  if (reason == FinishReason::kAbort) {
    ++stats_.counters.requests_aborted;
  } else {
    ++stats_.counters.requests_finished;
  }
  stats_.counters.generation_tokens_total += r.n_output();
  cache_.Release(r, /*cache=*/c.error.ok());
  r.done = true;
  Emit(r, /*final=*/true);
}

int32_t Scheduler::SampleNext(Request& r, std::span<float> logits, int32_t draft) {
  return output_.Sample(r, logits, draft);
}

bool Scheduler::AppendToken(Request& r, int32_t token, std::span<const float> logits) {
  std::optional<OutputProcessor::Ending> end = output_.Append(r, token, logits);
  if (!end) return false;
  Finish(r, end->reason, std::move(end->error));
  return true;
}

void Scheduler::ProcessLogits(Request& r, std::span<float> logits) {
  const int32_t token = SampleNext(r, logits, -1);
  if (!AppendToken(r, token, logits)) Emit(r, /*final=*/false);
}

bool Scheduler::Step() {
  if (!failure_.ok()) {  // failed: nothing can run any more
    AbortAll(failure_);
    return false;
  }
  // 1. Aborts.
  for (RequestId id : aborts_) {
    for (auto& r : waiting_) {
      if (r->id == id) Finish(*r, FinishReason::kAbort);
    }
    for (auto& r : running_) {
      if (r->id == id) Finish(*r, FinishReason::kAbort);
    }
  }
  aborts_.clear();
  std::erase_if(waiting_, [](const ReqPtr& r) { return r->done; });
  std::erase_if(running_, [](const ReqPtr& r) { return r->done; });

  // 2. Decode rows, then prefill chunks and admissions (a cache hit needs its MTP rows only
  // where the request may draft).
  const Clock::time_point step_start = Clock::now();
  const ScheduledBatch batch = planner_.Plan(spec_.WantMtpRows());
  if (batch.empty()) {
    if (running_.size() > 1) {
      planner_.Retract(running_.size() - 1);  // everyone is stuck on pages: make room
      return true;
    }
    if (running_.size() == 1) {  // cannot happen for a validated request; never spin
      Finish(*running_[0], FinishReason::kAbort,
             Internal("request {} cannot get KV pages", running_[0]->id));
      running_.clear();
      return true;
    }
    return false;
  }

  // 3. One forward, then sampling for the sequences whose chunk reached their end.
  if (cfg_.spec_steps > 0) {
    SpecForward(batch);
  } else {
    PlainForward(batch);
  }
  if (!failure_.ok()) {  // the runner broke: no request it holds can finish
    AbortAll(failure_);
    return true;
  }
  std::erase_if(running_, [](const ReqPtr& r) { return r->done; });
  planner_.StepDone();
  const BatchPlanner::Shape shape = planner_.last_shape();
  const double step_s = SecondsSince(step_start);
  step_costs_.Observe(shape.decode_rows, shape.prefill_tokens, shape.prefill_context, step_s);
  MX_LOG_DEBUG("step decode_rows={} prefill_tokens={} prefill_context={:.0f} ms={:.2f}",
               shape.decode_rows, shape.prefill_tokens, shape.prefill_context, step_s * 1e3);
  return true;
}

ForwardBatch Scheduler::MakeBatch(const ScheduledBatch& batch) const {
  ForwardBatch fb;
  for (auto [r, n] : batch) {
    SequenceInput s;
    s.seq = r->seq();
    s.start_pos = r->kv_len;
    const int64_t own = n - std::ssize(r->drafts);  // rows of tokens the request already has
    s.tokens.assign(r->tokens.begin() + r->kv_len, r->tokens.begin() + r->kv_len + own);
    s.tokens.insert(s.tokens.end(), r->drafts.begin(), r->drafts.end());
    s.all_logits = !r->drafts.empty();
    fb.seqs.push_back(std::move(s));
  }
  return fb;
}

void Scheduler::FinishChunk(Request& r, int64_t n, std::span<float> last_logits) {
  r.kv_len += n;
  if (n > 1) cache_.CacheUnfinished(r);
  if (r.remaining() == 0) ProcessLogits(r, last_logits);
}

void Scheduler::StartMaskPrefetch(const ScheduledBatch& batch) {
  if (!cfg_.overlap_masks) return;  // then Mask computes them at sampling
  std::vector<RequestConstraint*> masks;
  for (auto [r, n] : batch) {
    // Sampled after the forward: a prompt's last chunk, a decode step, a verify's rows.
    const bool samples = r->remaining() == n - std::ssize(r->drafts);
    if (r->constraint && samples) masks.push_back(&*r->constraint);
  }
  prefetch_.Start(std::move(masks));
}

void Scheduler::PlainForward(const ScheduledBatch& batch) {
  StartMaskPrefetch(batch);
  const Clock::time_point t0 = Clock::now();
  auto logits = runner_.Forward(MakeBatch(batch), cache_.kv());
  prefetch_.Wait();
  stats_.counters.forward_seconds += SecondsSince(t0);
  if (!logits.ok()) {
    ForwardFailed(logits.status());
    for (auto [r, n] : batch) Finish(*r, FinishReason::kAbort, logits.status());
    return;
  }
  MX_CHECK_EQ(static_cast<int64_t>(logits->size()), static_cast<int64_t>(batch.size()) * vocab_);
  for (size_t i = 0; i < batch.size(); ++i) {
    FinishChunk(*batch[i].first, batch[i].second,
                std::span<float>(logits->data() + i * vocab_, vocab_));
  }
}

EngineStats Scheduler::stats() const {
  EngineStats s = stats_;
  s.gauges.running = running();
  s.gauges.queued = waiting();
  s.gauges.kv_pages_used = cache_.pool().used_pages();
  s.gauges.kv_pages_total = cache_.pool().total_pages();
  s.gauges.kv_page_size = cfg_.page_size;
  for (const auto& r : running_) s.counters.generation_tokens_total += r->n_output();
  spec_.FillStats(&s.spec);
  if (s.spec.verify_steps > 0) {
    s.spec.accept_length_mean = static_cast<double>(s.spec.verify_steps + s.spec.tokens_accepted) /
                                static_cast<double>(s.spec.verify_steps);
  }
  return s;
}

std::vector<Scheduler::RunningView> Scheduler::running_view() const {
  std::vector<RunningView> v;
  for (const auto& r : running_) v.push_back({r->id, r->tokens, r->kv_len, r->mtp_len});
  return v;
}

}  // namespace mx
