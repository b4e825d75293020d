// The scheduler's KV memory: the page pool, the radix prefix cache and the per-request page
// tables (PagedKvStore), behind one interface. Every mutation that can fail has a predicate
// that says beforehand whether it will succeed (nano-vllm's can_allocate / allocate): the
// caller asks, then acts; the mutation checks the promise. Growth evicts unlocked cache pages
// (least recently used first) only as far as the free pages fall short.
//
// Pages a request of n tokens needs: PagesFor(n). A request holds a reference on each page of
// its table; the radix cache holds one on each page it keeps (page_pool.h).
//
// Thread-safety: none; the engine loop thread owns it (through the scheduler).
#pragma once

#include <cstdint>
#include <span>

#include "engine/scheduler_request.h"
#include "io/model_config.h"
#include "kv/page_pool.h"
#include "kv/paged_kv_store.h"
#include "kv/radix_cache.h"

namespace mx {

class CacheManager {
 public:
  CacheManager(const ModelConfig& model, const SchedulerConfig& cfg);

  int64_t page_size() const { return page_size_; }
  // Pages n tokens occupy.
  int64_t PagesFor(int64_t n_tokens) const { return (n_tokens + page_size_ - 1) / page_size_; }
  // Pages that are free now or would be after evicting every unlocked cached page.
  int64_t obtainable_pages() const { return pool_.free_pages() + radix_.evictable_pages(); }
  // Pages in seq's page table.
  int64_t held_pages(int64_t seq) const { return kv_.PageCount(seq); }

  // Growth of a page table to cover positions [0, n_positions).
  bool CanGrow(int64_t seq, int64_t n_positions) const;
  void Grow(int64_t seq, int64_t n_positions);  // REQUIRES: CanGrow(seq, n_positions)
  // The one "shrink to fit" rule: of the n positions [start, start + n), how many seq's pages
  // plus `extra_pages` more can hold (at most n; zero or less when none).
  int64_t Fit(int64_t seq, int64_t start, int64_t n, int64_t extra_pages) const;

  // Admission. LockPrefix: the longest cached page-aligned prefix of `tokens`, locked (so it
  // cannot be evicted while the caller decides); nothing when the radix cache is disabled.
  // Either Admit the request with it, or UnlockPrefix it.
  // Speculative: cached pages whose MTP-layer rows were not all written (the tail of a request
  // that finished in a verify, or one that ran without drafts) are left out of the prefix (they
  // are prefilled again) with `want_mtp_rows` (SpecPolicy::WantMtpRows).
  RadixCache::MatchResult LockPrefix(std::span<const int32_t> tokens, bool want_mtp_rows = true);
  void UnlockPrefix(const RadixCache::MatchResult& prefix);
  // Whether a request of n_tokens that starts from `prefix` fits beside `reserved_pages`
  // (pages promised to the running requests' future tokens).
  bool CanAdmit(const RadixCache::MatchResult& prefix, int64_t n_tokens,
                int64_t reserved_pages) const;
  // r's page table becomes the prefix's pages (r keeps the prefix's lock); kv_len = its length,
  // mtp_len = how much of it has MTP-layer rows.
  void Admit(ScheduledRequest& r, const RadixCache::MatchResult& prefix);
  // The length of the longest cached prefix of `tokens` (refreshes its LRU time; no lock).
  int64_t MatchLength(std::span<const int32_t> tokens);

  // After a prefill chunk: r's computed page-aligned prefix goes into the radix cache at once,
  // locked for r, so requests admitted later share it while r still runs.
  void CacheUnfinished(ScheduledRequest& r);
  // Drops r's pages and lock; with `cache`, its computed tokens go into the radix cache first.
  void Release(ScheduledRequest& r, bool cache);
  // Evicts every unlocked cached page; returns the pages freed.
  int64_t Flush() { return radix_.Flush(); }

  // Speculative (SchedulerConfig::spec_steps > 0): per page, how many of its leading rows have
  // their MTP-layer KV row written. MarkMtpRows: r's rows [from, to) now have theirs (kept only
  // where contiguous from the page's start). MtpRowsWritten: the leading positions of `table`
  // (at most `positions`) that have theirs.
  void MarkMtpRows(const ScheduledRequest& r, int64_t from, int64_t to);
  int64_t MtpRowsWritten(const std::vector<int32_t>& table, int64_t positions) const;

  const PagePool& pool() const { return pool_; }
  const RadixCache& radix() const { return radix_; }
  PagedKvStore& kv() { return kv_; }

 private:
  int64_t page_size_;
  bool radix_enabled_;
  PagePool pool_;
  PagedKvStore kv_;
  RadixCache radix_;
  std::vector<int32_t> mtp_rows_;  // [n_pages] with speculation, else empty
};

}  // namespace mx
