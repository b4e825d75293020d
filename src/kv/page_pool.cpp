// PagePool: a free stack plus reference counts.
#include "kv/page_pool.h"

#include "base/check.h"

namespace mx {

PagePool::PagePool(int64_t n_pages) : refs_(n_pages, 0) {
  MX_CHECK_GE(n_pages, 0);
  free_.reserve(n_pages);
  // Low ids are handed out first (free_ is a stack).
  for (int64_t p = n_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

bool PagePool::Alloc(int64_t n, std::vector<int32_t>& out) {
  if (n > free_pages()) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    refs_[p] = 1;
    out.push_back(p);
  }
  return true;
}

void PagePool::Ref(int32_t page) {
  MX_CHECK_GT(refs_[page], 0);
  ++refs_[page];
}

bool PagePool::Unref(int32_t page) {
  MX_CHECK_GT(refs_[page], 0);
  if (--refs_[page] > 0) return false;
  free_.push_back(page);
  return true;
}

}  // namespace mx
