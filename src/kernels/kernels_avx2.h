// The AVX2 + FMA level: every entry vectorized (8 lanes; the MXFP4 GEMM is mxfp4_avx2.cpp).
// Compiled with -mavx2 -mfma (mx_module); call only through the table, which GetKernelTable hands
// out only on CPUs with AVX2 and FMA.
#pragma once

#include "kernels/kernels.h"

namespace mx {

const KernelTable& Avx2KernelTable();

}  // namespace mx
