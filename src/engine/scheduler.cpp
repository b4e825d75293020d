// Scheduler: admission, chunked prefill + decode batches, retraction, sampling, stops.
#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "engine/scheduler_request.h"

namespace mx {

namespace {
constexpr double kInitNewTokenRatio = 0.7;  // sglang SGLANG_INIT_NEW_TOKEN_RATIO
constexpr double kMinNewTokenRatio = 0.1;
constexpr double kNewTokenRatioDecay = (kInitNewTokenRatio - kMinNewTokenRatio) / 600;
constexpr double kRetractRatioStep = 0.1;
constexpr size_t kLpmMaxQueue = 128;  // beyond: lpm falls back to fcfs (as sglang)

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
bool Contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

Scheduler::Scheduler(SchedulerConfig cfg, ModelRunner& runner, const tok::Tokenizer* tokenizer)
    : cfg_(std::move(cfg)),
      runner_(runner),
      tokenizer_(tokenizer),
      vocab_(runner.config().vocab_size),
      pool_(cfg_.n_pages),
      kv_(runner.config(), cfg_.page_size, cfg_.n_pages, cfg_.kv_dtype, cfg_.kv_scales),
      radix_(cfg_.page_size, pool_),
      new_token_ratio_(kInitNewTokenRatio) {}

Scheduler::~Scheduler() { AbortAll(Status(StatusCode::kAborted, "the engine was destroyed")); }

int64_t Scheduler::PagesFor(int64_t n_tokens) const {
  return (n_tokens + cfg_.page_size - 1) / cfg_.page_size;
}

void Scheduler::Add(RequestId id, GenerationRequest req, std::shared_ptr<ChunkSink> sink,
                    Clock::time_point submitted) {
  auto r = std::make_unique<Request>(req.sampling);
  r->id = id;
  r->sink = std::move(sink);
  r->submitted = submitted;
  r->tokens = req.prompt;
  r->n_prompt = static_cast<int32_t>(req.prompt.size());
  if (req.repetition_penalty != 1.0f) {
    r->penalty.seen.assign(vocab_, 0);
    for (int32_t t : req.prompt) r->penalty.seen[t] = 1;
  }
  if (tokenizer_ != nullptr && !req.stop.empty()) r->stop.emplace(*tokenizer_, req.stop);
  if (req.constraint) r->constraint.emplace(req.constraint, req.constraint_after_token);
  r->req = std::move(req);
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

int64_t Scheduler::FlushCache() { return radix_.Flush(); }

bool Scheduler::EnsurePages(Request& r, int64_t n_positions) {
  std::vector<int32_t>& table = kv_.PageTable(r.id);
  const int64_t need = PagesFor(n_positions) - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (pool_.free_pages() < need) radix_.Evict(need - pool_.free_pages());
  return pool_.Alloc(need, table);
}

void Scheduler::Release(Request& r, bool cache) {
  std::vector<int32_t>& table = kv_.PageTable(r.id);
  if (cache && !cfg_.disable_radix_cache && r.kv_len > 0) {
    radix_.Insert(std::span<const int32_t>(r.tokens).first(r.kv_len), table);
  }
  if (r.locked != nullptr) radix_.Unlock(r.locked);
  r.locked = nullptr;
  for (int32_t p : table) pool_.Unref(p);
  kv_.RemoveSequence(r.id);
  r.kv_len = 0;
}

void Scheduler::CacheUnfinished(Request& r) {
  if (cfg_.disable_radix_cache || r.kv_len < cfg_.page_size) return;
  const auto res = radix_.Insert(std::span<const int32_t>(r.tokens).first(r.kv_len),
                                 kv_.PageTable(static_cast<int64_t>(r.id)));
  radix_.Lock(res.node);
  if (r.locked != nullptr) radix_.Unlock(r.locked);
  r.locked = res.node;
}

void Scheduler::Retract(size_t i) {
  ReqPtr r = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  Release(*r, /*cache=*/true);
  r->drafts.clear();
  ++stats_.retractions;
  new_token_ratio_ = std::min(1.0, new_token_ratio_ + kRetractRatioStep);
  waiting_.push_front(std::move(r));
}

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
  c.queue_seconds = Seconds(r.admitted.value_or(now) - r.submitted);
  c.ttft_seconds = r.first_token ? Seconds(*r.first_token - r.submitted) : 0.0;
  c.e2e_seconds = Seconds(now - r.submitted);
  if (reason == FinishReason::kAbort) {
    ++stats_.requests_aborted;
  } else {
    ++stats_.requests_finished;
  }
  stats_.generation_tokens_total += r.n_output();
  Release(r, /*cache=*/c.error.ok());
  r.done = true;
  Emit(r, /*final=*/true);
}

int64_t Scheduler::EstimatedTokens(const Request& r) const {
  const double left = std::max(0, r.req.max_tokens - r.n_output());
  return static_cast<int64_t>(r.tokens.size()) + cfg_.spec_steps +
         static_cast<int64_t>(std::ceil(left * new_token_ratio_));
}

int64_t Scheduler::Reserved() const {
  int64_t total = 0;
  for (const auto& r : running_) {
    total += std::max<int64_t>(
        0, PagesFor(EstimatedTokens(*r)) - kv_.PageCount(static_cast<int64_t>(r->id)));
  }
  return total;
}

size_t Scheduler::PickWaiting() {
  if (!cfg_.lpm || cfg_.disable_radix_cache || waiting_.size() > kLpmMaxQueue) return 0;
  size_t best = 0;
  int64_t best_len = -1;
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const auto& t = waiting_[i]->tokens;
    const int64_t len = radix_.Match(std::span<const int32_t>(t).first(t.size() - 1)).tokens;
    if (len > best_len) {
      best_len = len;
      best = i;
    }
  }
  return best;
}

bool Scheduler::TryAdmit(int64_t& budget, std::vector<std::pair<Request*, int64_t>>& batch) {
  const size_t wi = PickWaiting();
  Request& r = *waiting_[wi];
  RadixCache::MatchResult m;
  if (!cfg_.disable_radix_cache) {
    m = radix_.Match(std::span<const int32_t>(r.tokens).first(r.tokens.size() - 1));
    radix_.Lock(m.node);
  }
  const int64_t need = PagesFor(EstimatedTokens(r)) - static_cast<int64_t>(m.pages.size());
  const int64_t avail = pool_.free_pages() + radix_.evictable_pages() - Reserved();
  if (need > avail) {
    if (m.node != nullptr) radix_.Unlock(m.node);
    return false;
  }
  ReqPtr owned = std::move(waiting_[wi]);
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(wi));
  std::vector<int32_t>& table = kv_.PageTable(r.id);
  table = m.pages;
  for (int32_t p : table) pool_.Ref(p);
  r.locked = m.node;
  r.kv_len = m.tokens;
  if (!r.admitted) {
    r.admitted = Clock::now();
    r.cached_tokens = m.tokens;
    stats_.prompt_tokens_total += r.n_prompt;
    stats_.cached_prompt_tokens_total += m.tokens;
    ++stats_.radix_lookups;
    stats_.radix_hit_tokens += m.tokens;
  }
  running_.push_back(std::move(owned));
  int64_t n = std::min(r.remaining(), budget);
  if (!EnsurePages(r, r.kv_len + n)) {
    const int64_t held = static_cast<int64_t>(table.size());
    n = std::min(
        n, (held + pool_.free_pages() + radix_.evictable_pages()) * cfg_.page_size - r.kv_len);
    if (n <= 0 || !EnsurePages(r, r.kv_len + n)) return true;  // admitted; no chunk yet
  }
  batch.push_back({&r, n});
  budget -= n;
  return true;
}

int32_t Scheduler::SampleNext(Request& r, std::span<float> logits, int32_t draft) {
  const GenerationRequest& q = r.req;
  ApplyPenalties(q, r.penalty, logits);
  if (r.n_output() < q.min_tokens) {
    MaskTokens(q.stop_token_ids, logits);
    if (!q.ignore_eos) MaskTokens(cfg_.eos_ids, logits);
  }
  if (r.constraint) r.constraint->Mask(logits);
  return draft >= 0 ? r.sampler.SampleSpeculative(logits, draft) : r.sampler.Sample(logits);
}

bool Scheduler::AppendToken(Request& r, int32_t token, std::span<const float> logits) {
  const GenerationRequest& q = r.req;
  if (r.constraint && !r.constraint->Accept(token)) {
    Finish(r, FinishReason::kAbort,
           Internal("request {}: token {} does not fit its output constraint", r.id, token));
    return true;
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
  r.pending.token_times.push_back(Seconds(now - r.submitted));

  const int32_t n_out = r.n_output();
  std::optional<StopMatcher::Match> sm;
  if (r.stop) sm = r.stop->Push(token);
  if (n_out >= q.min_tokens) {
    if (Contains(q.stop_token_ids, token) || (!q.ignore_eos && Contains(cfg_.eos_ids, token))) {
      r.pending.matched_stop_token = token;
      Finish(r, FinishReason::kStop);
      return true;
    }
    if (sm) {
      r.pending.matched_stop = sm->stop;
      r.pending.stop_trim_bytes = sm->trim_bytes;
      Finish(r, FinishReason::kStop);
      return true;
    }
  }
  if (r.constraint && r.constraint->Terminated()) {  // complete (even with ignore_eos)
    r.pending.matched_stop_token = token;
    Finish(r, FinishReason::kStop);
    return true;
  }
  if (n_out >= q.max_tokens || static_cast<int64_t>(r.tokens.size()) >= cfg_.context_window) {
    Finish(r, FinishReason::kLength);
    return true;
  }
  return false;
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

  // 2. Decode: one token for every running request that has finished its prefill.
  std::vector<std::pair<Request*, int64_t>> batch;
  for (size_t i = 0; i < running_.size();) {
    Request& r = *running_[i];
    if (r.remaining() != 1) {
      ++i;
      continue;
    }
    // Speculative: the last token and its drafts, verified in one forward (drafts are dropped
    // when their pages cannot be had).
    if (!r.drafts.empty() && !EnsurePages(r, r.kv_len + 1 + std::ssize(r.drafts))) {
      r.drafts.clear();
    }
    const int64_t n = 1 + std::ssize(r.drafts);
    if (EnsurePages(r, r.kv_len + n)) {
      batch.push_back({&r, n});
      ++i;
      continue;
    }
    const size_t youngest = running_.size() - 1;  // never already in the batch
    Retract(youngest);
    if (youngest == i) break;
  }

  // 3. Prefill chunks: requests mid-prefill first, then admissions.
  int64_t budget = cfg_.chunked_prefill_size;
  for (auto& rp : running_) {
    Request& r = *rp;
    if (r.remaining() <= 1 || budget <= 0) continue;
    int64_t n = std::min(r.remaining(), budget);
    if (!EnsurePages(r, r.kv_len + n)) {
      const int64_t held = static_cast<int64_t>(kv_.PageTable(r.id).size());
      n = std::min(
          n, (held + pool_.free_pages() + radix_.evictable_pages()) * cfg_.page_size - r.kv_len);
      if (n <= 0 || !EnsurePages(r, r.kv_len + n)) continue;
    }
    batch.push_back({&r, n});
    budget -= n;
  }
  while (budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < cfg_.max_running_requests) {
    if (!TryAdmit(budget, batch)) break;
  }
  if (batch.empty()) {
    if (running_.size() > 1) {
      Retract(running_.size() - 1);  // everyone is stuck on pages: make room
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

  // 4. One forward, then sampling for the sequences whose chunk reached their end.
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
  new_token_ratio_ = std::max(kMinNewTokenRatio, new_token_ratio_ - kNewTokenRatioDecay);
  return true;
}

ForwardBatch Scheduler::MakeBatch(const std::vector<std::pair<Request*, int64_t>>& batch) const {
  ForwardBatch fb;
  for (auto [r, n] : batch) {
    SequenceInput s;
    s.seq = static_cast<int64_t>(r->id);
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
  if (n > 1) CacheUnfinished(r);
  if (r.remaining() == 0) ProcessLogits(r, last_logits);
}

void Scheduler::PlainForward(const std::vector<std::pair<Request*, int64_t>>& batch) {
  auto logits = runner_.Forward(MakeBatch(batch), kv_);
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
  s.running = running();
  s.queued = waiting();
  s.kv_pages_used = pool_.used_pages();
  s.kv_pages_total = pool_.total_pages();
  s.kv_page_size = cfg_.page_size;
  for (const auto& r : running_) s.generation_tokens_total += r->n_output();
  if (s.spec_verify_steps > 0) {
    s.spec_accept_length_mean = static_cast<double>(s.spec_verify_steps + s.spec_tokens_accepted) /
                                static_cast<double>(s.spec_verify_steps);
  }
  return s;
}

std::vector<Scheduler::RunningView> Scheduler::running_view() const {
  std::vector<RunningView> v;
  for (const auto& r : running_) v.push_back({r->id, r->tokens, r->kv_len});
  return v;
}

}  // namespace mx
