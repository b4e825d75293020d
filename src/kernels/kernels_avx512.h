// AVX-512 kernels. Compiled with the AVX-512 flags (mx_module: *_avx512.cpp); call only through
// the table, which GetKernelTable hands out only on CPUs with the features each entry needs.
// ops_avx512.cpp: every entry on AVX-512 F/BW/DQ/VL; kernels_avx512.cpp: the bf16 GEMM on
// AVX512_BF16; mxfp4_avx512.cpp: the MXFP4 GEMM on VNNI + VBMI.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace mx::avx512 {

// ops_avx512.cpp (AVX-512 F/BW/DQ/VL): 16-lane GEMMs (bf16 weights widened to fp32), RMSNorm,
// softmax, SwiGLU, RoPE, top-k and attention; each entry's contract is KernelTable's.
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

// KernelTable::gemm_bf16 on the BF16 dot-product instruction (vdpbf16ps; needs AVX512_BF16).
// Activations are split into three bf16 parts that sum to them exactly, so it differs from the
// fp32 kernels only by summation order (kernels_avx512.cpp).
void GemmBf16Dot(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, GemmTiling t);
// The same with x rounded to bf16 once (GemmActivations::kBf16): one vdpbf16ps per product.
void GemmBf16DotX16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y,
                    int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t);

}  // namespace mx::avx512
