// The AVX2 + FMA level's entries: every one vectorized (8 lanes; the MXFP4, packed bf16, FP8 and
// attention-rows kernels are in their own files). Compiled with -mavx2 -mfma (mx_module); call
// only through the table (kernels.cpp), which GetKernelTable hands out only on CPUs with AVX2
// and FMA. Each entry's contract is KernelTable's of the same name.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace mx::avx2 {

void GemmBf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
              int64_t m, int64_t n, int64_t k, GemmTiling t);
void GemmF32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmTiling t);
void RmsNorm(const float* x, const float* w, float eps, int64_t n, float* y);
void Softmax(float* x, int64_t n);
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void Rope(float* x, int64_t d, const float* cos, const float* sin, bool interleave);
void TopK(const float* scores, int64_t n, int64_t k, int32_t* out);
void Attend(const float* qa, const float* qb, int64_t da, int64_t db, const float* const* ka,
            const float* const* kb, const float* const* v, int64_t dv, int64_t n, float scale,
            float* scratch, float* out);

}  // namespace mx::avx2
