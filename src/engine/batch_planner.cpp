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
  for (size_t i = static_cast<size_t>(shape_.decode_rows); i < batch.size(); ++i) {
    shape_.prefill_tokens += batch[i].second;
  }
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

void BatchPlanner::PlanPrefill(ScheduledBatch& batch, bool want_mtp_rows) {
  int64_t budget = cfg_.chunked_prefill_size;
  if (!batch.empty() && cfg_.max_decode_gap_s > 0.0) {
    budget = costs_.PrefillBudget(cfg_.max_decode_gap_s, cfg_.min_prefill_chunk, budget);
  }
  for (auto& rp : running_) {
    ScheduledRequest& r = *rp;
    if (r.remaining() <= 1 || budget <= 0) continue;
    const int64_t n = GrowChunk(r, std::min(r.remaining(), budget));
    if (n == 0) continue;
    batch.push_back({&r, n});
    budget -= n;
  }
  while (budget > 0 && !waiting_.empty() &&
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

bool BatchPlanner::TryAdmit(int64_t& budget, ScheduledBatch& batch, bool want_mtp_rows) {
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
  const int64_t n = GrowChunk(r, std::min(r.remaining(), budget));
  if (n == 0) return true;  // admitted; no chunk yet
  batch.push_back({&r, n});
  budget -= n;
  return true;
}

}  // namespace mx
