// The AVX2 + FMA level. gemm_bf16 / gemm_f32 / rms_norm / attend are vectorized; the other
// entries are the ref kernels. Compiled with -mavx2 -mfma (mx_module); call only through the
// table, which GetKernelTable hands out only on CPUs with AVX2 and FMA.
#pragma once

#include "kernels/kernels.h"

namespace mx {

const KernelTable& Avx2KernelTable();

}  // namespace mx
