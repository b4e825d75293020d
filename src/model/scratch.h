// Growable scratch buffers for the forward's hot loops: a buffer grows to the largest size a
// call has needed and is then reused, so steady-state forwards allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mx {

// v.data() with at least n elements (contents unspecified).
template <typename T>
T* Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace mx
