// The scalar reference kernels (level `ref`): the slow twins of every vectorized kernel.
// Plain loops with fp32 accumulation; see kernels.h for the contracts.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/gemm_tiling.h"

namespace mx::ref {

void GemmBf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
              int64_t m, int64_t n, int64_t k, GemmTiling t);
// GemmBf16 with each x rounded to bf16 first (GemmActivations::kBf16).
void GemmBf16X16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, GemmTiling t);
void GemmF32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmTiling t);
void RmsNorm(const float* x, const float* w, float eps, int64_t n, float* y);
void Softmax(float* x, int64_t n);
void Rope(float* x, int64_t d, const float* cos, const float* sin, bool interleave);
void TopK(const float* scores, int64_t n, int64_t k, int32_t* out);
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void Attend(const float* qa, const float* qb, int64_t da, int64_t db, const float* const* ka,
            const float* const* kb, const float* const* v, int64_t dv, int64_t n, float scale,
            float* scratch, float* out);

}  // namespace mx::ref

namespace mx {

// What the vector top-k kernels (AVX2, AVX-512) share, compiled without ISA flags so either
// may call it: the k best scores seen so far, the worst kept (lowest score; among equal scores
// the highest index) at the front. Scores are offered in index order, so a later one enters
// only if strictly above threshold(); the kernels compare whole vectors against it.
class TopKHeap {
 public:
  TopKHeap(const float* scores, int64_t k);  // the first k scores
  float threshold() const { return heap_.front().first; }
  void Offer(float score, int32_t index);  // no-op unless score > threshold()
  void Write(int32_t* out);                // the k indices, best first
 private:
  std::vector<std::pair<float, int32_t>> heap_;
};

}  // namespace mx
