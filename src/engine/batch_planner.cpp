// BatchPlanner: decode rows, retraction, prefill chunks and admission under the page budget.
#include "engine/batch_planner.h"

#include <algorithm>
#include <cmath>

namespace mx {

namespace {
constexpr double kInitNewTokenRatio = 0.7;  // sglang SGLANG_INIT_NEW_TOKEN_RATIO
constexpr double kMinNewTokenRatio = 0.1;
constexpr double kNewTokenRatioDecay = (kInitNewTokenRatio - kMinNewTokenRatio) / 600;
constexpr double kRetractRatioStep = 0.1;
constexpr size_t kLpmMaxQueue = 128;  // beyond: lpm falls back to fcfs (as sglang)

// A request's tokens but the last: the prefix a cache hit may cover (the last token's logits
// must be computed).
std::span<const int32_t> CacheableTokens(const ScheduledRequest& r) {
  return std::span<const int32_t>(r.tokens).first(r.tokens.size() - 1);
}
}  // namespace

BatchPlanner::BatchPlanner(const SchedulerConfig& cfg, CacheManager& cache,
                           std::deque<ReqPtr>& waiting, std::vector<ReqPtr>& running,
                           EngineStats& stats, const StepCosts& costs)
    : cfg_(cfg),
      cache_(cache),
      waiting_(waiting),
      running_(running),
      stats_(stats),
      costs_(costs),
      new_token_ratio_(kInitNewTokenRatio) {}

ScheduledBatch BatchPlanner::Plan(bool want_mtp_rows) {
  ScheduledBatch batch = PlanDecode();
  shape_.decode_rows = std::ssize(batch);
  PlanPrefill(batch, want_mtp_rows);
  shape_.prefill_tokens = 0;
  double positions = 0.0;
  for (size_t i = static_cast<size_t>(shape_.decode_rows); i < batch.size(); ++i) {
    const auto [r, n] = batch[i];
    shape_.prefill_tokens += n;
    positions += StepCosts::MidContext(r->kv_len, n) * static_cast<double>(n);
  }
  shape_.prefill_context =
      shape_.prefill_tokens > 0 ? positions / static_cast<double>(shape_.prefill_tokens) : 0.0;
  return batch;
}

void BatchPlanner::StepDone() {
  new_token_ratio_ = std::max(kMinNewTokenRatio, new_token_ratio_ - kNewTokenRatioDecay);
}

bool BatchPlanner::TryGrow(ScheduledRequest& r, int64_t n_positions) {
  if (!cache_.CanGrow(r.seq(), n_positions)) return false;
  cache_.Grow(r.seq(), n_positions);
  return true;
}

int64_t BatchPlanner::GrowChunk(ScheduledRequest& r, int64_t n) {
  if (!cache_.CanGrow(r.seq(), r.kv_len + n)) {
    n = cache_.Fit(r.seq(), r.kv_len, n, cache_.obtainable_pages());
  }
  if (n <= 0) return 0;
  cache_.Grow(r.seq(), r.kv_len + n);
  return n;
}

void BatchPlanner::Retract(size_t i) {
  ReqPtr r = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  cache_.Release(*r, /*cache=*/true);
  r->drafts.clear();
  ++stats_.counters.retractions;
  new_token_ratio_ = std::min(1.0, new_token_ratio_ + kRetractRatioStep);
  waiting_.push_front(std::move(r));
}

ScheduledBatch BatchPlanner::PlanDecode() {
  ScheduledBatch batch;
  for (size_t i = 0; i < running_.size();) {
    ScheduledRequest& r = *running_[i];
    if (r.remaining() != 1) {
      ++i;
      continue;
    }
    // Speculative: the last token and its drafts, verified in one forward (drafts are dropped
    // when their pages cannot be had).
    if (!r.drafts.empty() && !TryGrow(r, r.kv_len + 1 + std::ssize(r.drafts))) r.drafts.clear();
    const int64_t n = 1 + std::ssize(r.drafts);
    if (TryGrow(r, r.kv_len + n)) {
      batch.push_back({&r, n});
      ++i;
      continue;
    }
    const size_t youngest = running_.size() - 1;  // never already in the batch
    Retract(youngest);
    if (youngest == i) break;
  }
  return batch;
}

BatchPlanner::PrefillBudget BatchPlanner::MakePrefillBudget(int64_t decode_rows) const {
  PrefillBudget b;
  b.tokens = cfg_.chunked_prefill_size;
  b.paced = decode_rows > 0 && cfg_.max_decode_gap_s > 0.0;
  if (b.paced) {
    const double decode = costs_.DecodeSeconds(decode_rows);
    b.seconds = decode < 0.0 ? 0.0 : cfg_.max_decode_gap_s - decode;  // unknown: the minimum
  }
  return b;
}

int64_t BatchPlanner::ChunkLimit(const PrefillBudget& budget, int64_t start, int64_t want) const {
  int64_t n = std::min(want, budget.tokens);
  if (!budget.paced || n <= 0) return std::max<int64_t>(n, 0);
  const int64_t fit = costs_.TokensWithin(budget.seconds, start, n);  // -1: unknown cost
  const int64_t floor = budget.chunked ? 0 : std::min(cfg_.min_prefill_chunk, n);
  return std::max(floor, std::max<int64_t>(fit, 0));
}

void BatchPlanner::AddChunk(ScheduledRequest& r, PrefillBudget& budget, ScheduledBatch& batch) {
  const int64_t n = GrowChunk(r, ChunkLimit(budget, r.kv_len, r.remaining()));
  if (n == 0) return;
  batch.push_back({&r, n});
  budget.tokens -= n;
  budget.chunked = true;
  if (budget.paced) {
    const double cost = costs_.ChunkSeconds(r.kv_len, n);
    budget.seconds = cost < 0.0 ? 0.0 : budget.seconds - cost;
  }
}

void BatchPlanner::PlanPrefill(ScheduledBatch& batch, bool want_mtp_rows) {
  PrefillBudget budget = MakePrefillBudget(std::ssize(batch));
  for (auto& rp : running_) {
    ScheduledRequest& r = *rp;
    if (r.remaining() <= 1 || !budget.Open()) continue;
    AddChunk(r, budget, batch);
  }
  while (budget.Open() && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < cfg_.max_running_requests) {
    if (!TryAdmit(budget, batch, want_mtp_rows)) break;
  }
}

int64_t BatchPlanner::EstimatedTokens(const ScheduledRequest& r) const {
  const double left = std::max(0, r.req.max_tokens - r.n_output());
  return static_cast<int64_t>(r.tokens.size()) + cfg_.spec_steps +
         static_cast<int64_t>(std::ceil(left * new_token_ratio_));
}

int64_t BatchPlanner::Reserved() const {
  int64_t total = 0;
  for (const auto& r : running_) {
    total +=
        std::max<int64_t>(0, cache_.PagesFor(EstimatedTokens(*r)) - cache_.held_pages(r->seq()));
  }
  return total;
}

size_t BatchPlanner::PickWaiting() {
  if (!cfg_.lpm || cfg_.disable_radix_cache || waiting_.size() > kLpmMaxQueue) return 0;
  size_t best = 0;
  int64_t best_len = -1;
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const int64_t len = cache_.MatchLength(CacheableTokens(*waiting_[i]));
    if (len > best_len) {
      best_len = len;
      best = i;
    }
  }
  return best;
}

bool BatchPlanner::TryAdmit(PrefillBudget& budget, ScheduledBatch& batch, bool want_mtp_rows) {
  const size_t wi = PickWaiting();
  ScheduledRequest& r = *waiting_[wi];
  const RadixCache::MatchResult m = cache_.LockPrefix(CacheableTokens(r), want_mtp_rows);
  if (!cache_.CanAdmit(m, EstimatedTokens(r), Reserved())) {
    cache_.UnlockPrefix(m);
    return false;
  }
  ReqPtr owned = std::move(waiting_[wi]);
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(wi));
  cache_.Admit(r, m);
  if (!r.admitted) {
    r.admitted = Clock::now();
    r.cached_tokens = m.tokens;
    stats_.counters.prompt_tokens_total += r.n_prompt;
    stats_.counters.cached_prompt_tokens_total += m.tokens;
    ++stats_.counters.radix_lookups;
    stats_.counters.radix_hit_tokens += m.tokens;
  }
  running_.push_back(std::move(owned));
  AddChunk(r, budget, batch);  // none when pages or the budget allow none: admitted all the same
  return true;
}

}  // namespace mx
