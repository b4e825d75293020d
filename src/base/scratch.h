// Grow: the one kind of working memory for hot loops that would otherwise allocate (and have the
// kernel fault in and clear) fresh buffers on every call. A std::vector kept by its owner (a
// workspace member, or thread_local) is grown to the largest size a call has needed and then
// reused, so after the first calls at the largest size a loop that uses it allocates nothing.
// Thread-safety: none; keep one per thread (or per owner that is used from one thread).
#pragma once

#include <cstdint>
#include <vector>

namespace mx {

// v.data() with room for at least n elements; the caller writes before it reads (what a call
// left there is unspecified to the next).
template <typename T>
T* Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace mx
