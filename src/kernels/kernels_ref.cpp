// Scalar reference kernels. Clarity first: these define the expected results.
#include "kernels/kernels_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/numerics.h"

namespace mx::ref {

namespace {

// x · Wᵀ with W bf16, each x taken as round(x) (identity, or the bf16 rounding).
template <float (*Round)(float)>
void GemmBf16Rounded(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y,
                     int64_t ldy, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ldx;
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* wj = w + j * ldw;
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) acc += Round(xi[t]) * Bf16ToF32(wj[t]);
      y[i * ldy + j] = acc;
    }
  }
}

float Exact(float v) { return v; }
float ToBf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

}  // namespace

void GemmBf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
              int64_t m, int64_t n, int64_t k, GemmTiling /*t: loop order only*/) {
  GemmBf16Rounded<Exact>(x, ldx, w, ldw, y, ldy, m, n, k);
}

void GemmBf16X16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, GemmTiling /*t: loop order only*/) {
  GemmBf16Rounded<ToBf16>(x, ldx, w, ldw, y, ldy, m, n, k);
}

void GemmF32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmTiling /*t: loop order only*/) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ldx;
    for (int64_t j = 0; j < n; ++j) {
      const float* wj = w + j * ldw;
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) acc += xi[t] * wj[t];
      y[i * ldy + j] = acc;
    }
  }
}

void RmsNorm(const float* x, const float* w, float eps, int64_t n, float* y) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

void Softmax(float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);  // exp(-inf) = 0
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void Attend(const float* qa, const float* qb, int64_t da, int64_t db, const float* const* ka,
            const float* const* kb, const float* const* v, int64_t dv, int64_t n, float scale,
            float* scratch, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    float s = 0.0f;
    for (int64_t i = 0; i < da; ++i) s += qa[i] * ka[t][i];
    float r = 0.0f;
    for (int64_t i = 0; i < db; ++i) r += qb[i] * kb[t][i];
    scratch[t] = (s + r) * scale;
  }
  Softmax(scratch, n);
  std::fill(out, out + dv, 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t d = 0; d < dv; ++d) out[d] += scratch[t] * v[t][d];
  }
}

void Rope(float* x, int64_t d, const float* cos, const float* sin, bool interleave) {
  const int64_t half = d / 2;
  for (int64_t j = 0; j < half; ++j) {
    float* a = interleave ? &x[2 * j] : &x[j];
    float* b = interleave ? &x[2 * j + 1] : &x[j + half];
    const float x0 = *a, x1 = *b;
    *a = x0 * cos[j] - x1 * sin[j];
    *b = x0 * sin[j] + x1 * cos[j];
  }
}

void TopK(const float* scores, int64_t n, int64_t k, int32_t* out) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Descending score; ties (and equal -inf) keep the lower index first.
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return a < b;
  });
  std::copy(order.begin(), order.begin() + k, out);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace mx::ref

namespace mx {

namespace {
// "a is better than b": higher score, or equal score and lower index. As a heap comparator it
// keeps the worst entry at the front.
bool Better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}
}  // namespace

TopKHeap::TopKHeap(const float* scores, int64_t k) {
  heap_.reserve(k);
  for (int64_t i = 0; i < k; ++i) heap_.emplace_back(scores[i], static_cast<int32_t>(i));
  std::make_heap(heap_.begin(), heap_.end(), Better);
}

void TopKHeap::Offer(float score, int32_t index) {
  if (!(score > threshold())) return;
  std::pop_heap(heap_.begin(), heap_.end(), Better);
  heap_.back() = {score, index};
  std::push_heap(heap_.begin(), heap_.end(), Better);
}

void TopKHeap::Write(int32_t* out) {
  std::sort(heap_.begin(), heap_.end(), Better);
  for (size_t i = 0; i < heap_.size(); ++i) out[i] = heap_[i].second;
}

}  // namespace mx
