// Fixed-size KV pages handed out by id, with a reference count per page: a running request
// holds one reference on each page of its page table and the radix cache one on each page it
// keeps, so a page shared by both returns to the free list only when the last holder lets go.
//
// Thread-safety: none (the engine loop thread owns it).
#pragma once

#include <cstdint>
#include <vector>

namespace mx {

class PagePool {
 public:
  explicit PagePool(int64_t n_pages);

  int64_t total_pages() const { return static_cast<int64_t>(refs_.size()); }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_pages() const { return total_pages() - free_pages(); }

  // Appends n free pages (reference count 1 each) to `out`. Returns false and takes nothing
  // when fewer than n are free.
  bool Alloc(int64_t n, std::vector<int32_t>& out);
  // REQUIRES: the page is in use.
  void Ref(int32_t page);
  // Drops one reference; returns true when the page became free. REQUIRES: the page is in use.
  bool Unref(int32_t page);
  int32_t refcount(int32_t page) const { return refs_[page]; }

 private:
  std::vector<int32_t> refs_;  // [n_pages]
  std::vector<int32_t> free_;  // a stack of free page ids
};

}  // namespace mx
