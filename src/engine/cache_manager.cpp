// CacheManager: page tables over the pool, growth with eviction, admission over the radix cache.
#include "engine/cache_manager.h"

#include <algorithm>

#include "base/check.h"

namespace mx {

CacheManager::CacheManager(const ModelConfig& model, const SchedulerConfig& cfg)
    : page_size_(cfg.page_size),
      radix_enabled_(!cfg.disable_radix_cache),
      pool_(cfg.n_pages),
      kv_(model, cfg.page_size, cfg.n_pages, cfg.kv_dtype, cfg.kv_scales),
      radix_(cfg.page_size, pool_) {
  if (cfg.spec_steps > 0) mtp_rows_.assign(cfg.n_pages, 0);
}

bool CacheManager::CanGrow(int64_t seq, int64_t n_positions) const {
  return PagesFor(n_positions) - held_pages(seq) <= obtainable_pages();
}

void CacheManager::Grow(int64_t seq, int64_t n_positions) {
  std::vector<int32_t>& table = kv_.PageTable(seq);
  const int64_t need = PagesFor(n_positions) - static_cast<int64_t>(table.size());
  if (need <= 0) return;
  if (pool_.free_pages() < need) radix_.Evict(need - pool_.free_pages());
  // Holds whenever CanGrow did: an unlocked cached page has no other holder, so evicting it
  // frees it.
  const size_t before = table.size();
  MX_CHECK(pool_.Alloc(need, table));
  if (!mtp_rows_.empty()) {
    for (size_t i = before; i < table.size(); ++i) mtp_rows_[table[i]] = 0;
  }
}

int64_t CacheManager::Fit(int64_t seq, int64_t start, int64_t n, int64_t extra_pages) const {
  return std::min(n, (held_pages(seq) + extra_pages) * page_size_ - start);
}

RadixCache::MatchResult CacheManager::LockPrefix(std::span<const int32_t> tokens,
                                                 bool want_mtp_rows) {
  RadixCache::MatchResult m;
  if (!radix_enabled_) return m;
  m = radix_.Match(tokens);
  if (!mtp_rows_.empty() && want_mtp_rows && m.tokens > 0) {
    const int64_t ok = MtpRowsWritten(m.pages, m.tokens) / page_size_ * page_size_;
    if (ok < m.tokens) m = radix_.Match(tokens.first(ok));
  }
  radix_.Lock(m.node);
  return m;
}

void CacheManager::UnlockPrefix(const RadixCache::MatchResult& prefix) {
  if (prefix.node != nullptr) radix_.Unlock(prefix.node);
}

bool CacheManager::CanAdmit(const RadixCache::MatchResult& prefix, int64_t n_tokens,
                            int64_t reserved_pages) const {
  const int64_t need = PagesFor(n_tokens) - static_cast<int64_t>(prefix.pages.size());
  return need <= obtainable_pages() - reserved_pages;
}

void CacheManager::Admit(ScheduledRequest& r, const RadixCache::MatchResult& prefix) {
  std::vector<int32_t>& table = kv_.PageTable(r.seq());
  table = prefix.pages;
  for (int32_t p : table) pool_.Ref(p);
  r.locked = prefix.node;
  r.kv_len = prefix.tokens;
  r.mtp_len = mtp_rows_.empty() ? 0 : MtpRowsWritten(table, prefix.tokens);
}

void CacheManager::MarkMtpRows(const ScheduledRequest& r, int64_t from, int64_t to) {
  const std::vector<int32_t>& table = kv_.PageTable(r.seq());
  for (int64_t p = from; p < to; ++p) {
    int32_t& n = mtp_rows_[table[p / page_size_]];
    if (n == p % page_size_) n = static_cast<int32_t>(p % page_size_ + 1);
  }
}

int64_t CacheManager::MtpRowsWritten(const std::vector<int32_t>& table, int64_t positions) const {
  int64_t n = 0;
  for (int32_t page : table) {
    n += mtp_rows_[page];
    if (mtp_rows_[page] < page_size_) break;
  }
  return std::min(n, positions);
}

int64_t CacheManager::MatchLength(std::span<const int32_t> tokens) {
  return radix_.Match(tokens).tokens;
}

void CacheManager::CacheUnfinished(ScheduledRequest& r) {
  if (!radix_enabled_ || r.kv_len < page_size_) return;
  const auto res =
      radix_.Insert(std::span<const int32_t>(r.tokens).first(r.kv_len), kv_.PageTable(r.seq()));
  radix_.Lock(res.node);
  if (r.locked != nullptr) radix_.Unlock(r.locked);
  r.locked = res.node;
}

void CacheManager::Release(ScheduledRequest& r, bool cache) {
  std::vector<int32_t>& table = kv_.PageTable(r.seq());
  if (cache && radix_enabled_ && r.kv_len > 0) {
    radix_.Insert(std::span<const int32_t>(r.tokens).first(r.kv_len), table);
  }
  if (r.locked != nullptr) radix_.Unlock(r.locked);
  r.locked = nullptr;
  for (int32_t p : table) pool_.Unref(p);
  kv_.RemoveSequence(r.seq());
  r.kv_len = 0;
  r.mtp_len = 0;
  r.mtp_hidden.clear();
}

}  // namespace mx
