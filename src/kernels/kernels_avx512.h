// AVX-512 kernels. Compiled with the AVX-512 flags (mx_module: *_avx512.cpp); call only through
// the table, which GetKernelTable hands out only on CPUs with the features each entry needs.
// ops_avx512.cpp: every entry on AVX-512 F/BW/DQ/VL; kernels_avx512.cpp: the bf16 GEMM on
// AVX512_BF16; mxfp4_avx512.cpp: the MXFP4 GEMM on VNNI + VBMI.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace mx {

// The level's table without its MXFP4 entry: 16-lane GEMMs (bf16 weights widened to fp32),
// RMSNorm, softmax, RoPE, top-k, SwiGLU and attention.
const KernelTable& Avx512KernelTable();

}  // namespace mx

namespace mx::avx512 {

// KernelTable::gemm_bf16 on the BF16 dot-product instruction (vdpbf16ps; needs AVX512_BF16).
// Activations are split into three bf16 parts that sum to them exactly, so it differs from the
// fp32 kernels only by summation order (kernels_avx512.cpp).
void GemmBf16Dot(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, GemmTiling t);
// The same with x rounded to bf16 once (GemmActivations::kBf16): one vdpbf16ps per product.
void GemmBf16DotX16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y,
                    int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t);

}  // namespace mx::avx512
