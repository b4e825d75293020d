// RequestConstraint: the grammar's mask on a row of logits, its advance, draft trimming, and
// the thread that computes masks during the forward.
#include "engine/request_constraint.h"

#include <cmath>

namespace mx {

RequestConstraint::RequestConstraint(std::shared_ptr<const grammar::CompiledGrammar> g,
                                     int32_t start_after_token, bool repeats)
    : grammar_(std::move(g)),
      start_after_(start_after_token),
      repeats_(repeats && start_after_token >= 0),
      active_(start_after_token < 0) {
  matcher_.emplace(grammar_);
}

void RequestConstraint::Prefetch() {
  if (!active_ || cur_ < ready_) return;  // else cur_ == ready_ == 0 (Accept resets both)
  if (masks_.size() < chain_.size() + 1) masks_.resize(chain_.size() + 1);
  matcher_->FillMask(&masks_[0]);
  ready_ = 1;
  // Along the chain (TrimDrafts kept only tokens the grammar takes; stop at its end anyway).
  for (int32_t t : chain_) {
    if (matcher_->Terminated() || !matcher_->AcceptToken(t)) break;
    matcher_->FillMask(&masks_[ready_++]);
  }
  matcher_->Rollback(static_cast<int>(ready_ - 1));
}

void RequestConstraint::Mask(std::span<float> logits) {
  if (!active_) return;
  Prefetch();
  grammar::ApplyTokenMask(masks_[cur_], logits);
  for (float x : logits) {
    if (!std::isinf(x) || x > 0) return;
  }
  const grammar::VocabIndex& v = matcher_->vocab();
  for (int32_t id : v.eos_ids()) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = 0.0f;
  }
}

bool RequestConstraint::Accept(int32_t token) {
  if (!active_) {
    active_ = token == start_after_;
    chain_.clear();
    cur_ = ready_ = 0;
    return true;
  }
  const bool ok = matcher_->AcceptToken(token);
  if (!ok) return false;
  if (repeats_ && matcher_->Complete()) {  // the span is written: free until the next start
    matcher_.emplace(grammar_);
    active_ = false;
    chain_.clear();
    cur_ = ready_ = 0;
    return true;
  }
  if (cur_ < chain_.size() && chain_[cur_] == token && cur_ + 1 < ready_) {
    ++cur_;  // the chain's next state: its mask is ready
  } else {
    chain_.clear();
    cur_ = ready_ = 0;
  }
  return true;
}

void RequestConstraint::TrimDrafts(std::vector<int32_t>* drafts) {
  bool active = active_;
  int accepted = 0;
  size_t k = 0;
  for (; k < drafts->size(); ++k) {
    const int32_t t = (*drafts)[k];
    if (!active) {
      active = t == start_after_;
      continue;
    }
    if (!matcher_->AcceptToken(t)) break;
    ++accepted;
  }
  matcher_->Rollback(accepted);
  drafts->resize(k);
  // The chain Prefetch walks: from the current state, so only while the grammar is already on.
  chain_.clear();
  cur_ = ready_ = 0;
  if (active_) chain_ = *drafts;
}

MaskPrefetcher::~MaskPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaskPrefetcher::Start(std::vector<RequestConstraint*> batch) {
  if (batch.empty()) return;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = std::move(batch);
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskPrefetcher::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
}

void MaskPrefetcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || busy_; });
    if (stop_) return;
    std::vector<RequestConstraint*> work = std::move(work_);
    lock.unlock();
    for (RequestConstraint* c : work) c->Prefetch();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace mx
