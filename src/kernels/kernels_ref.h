// The scalar reference kernels (level `ref`): the slow twins of every vectorized kernel.
// Plain loops with fp32 accumulation; see kernels.h for the contracts.
#pragma once

#include <cstdint>

#include "kernels/gemm_tiling.h"

namespace mx::ref {

void GemmBf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
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
