// ScratchBuffer: grow-only working memory for hot loops that would otherwise allocate (and have
// the kernel fault in and zero) fresh buffers on every call. Get(n) returns storage for n
// elements whose contents are unspecified: the caller writes before it reads. Storage is only
// ever replaced by a larger block, so after the first calls at the largest size a loop that
// uses it allocates nothing.
// Thread-safety: none; keep one per thread (or per owner that is used from one thread).
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

namespace mx {

template <typename T>
class ScratchBuffer {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "scratch elements are left unconstructed");

 public:
  // REQUIRES: the previous contents are not needed (they are lost when the buffer grows).
  T* Get(size_t n) {
    if (n > capacity_) {
      data_.reset();  // free first: the old and the new block need not coexist
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

}  // namespace mx
