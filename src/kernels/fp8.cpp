// The scalar FP8 block-scaled GEMM (the slow twin) and the threaded wrapper.
#include "kernels/fp8.h"

#include <algorithm>
#include <limits>

#include "base/check.h"
#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx {

namespace ref {

void GemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase, float* y,
             int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling /*t: loop order only*/) {
  const int64_t kb = Fp8ScaleCols(k);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* wj = w + j * k;
    const float* sj = s + (phase + j) / kFp8Block * kb;
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) acc += xi[t] * (Fp8E4M3FnToF32(wj[t]) * sj[t / kFp8Block]);
      y[i * ldy + j] = acc;
    }
  }
}

}  // namespace ref

void GemmFp8(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
             const uint8_t* w, const float* s, int64_t phase, int64_t n, float* y, GemmTiling t) {
  MX_CHECK(phase >= 0 && phase < kFp8Block);
  std::fill(y, y + m * n, std::numeric_limits<float>::quiet_NaN());
  const GemmFp8Fn fn = kt.gemm_fp8 != nullptr ? kt.gemm_fp8 : ref::GemmFp8;
  const int64_t kb = Fp8ScaleCols(k);
  constexpr int64_t kMinRowsPerWorker = 16;
  if (pool.size() <= 1 || n < 2 * kMinRowsPerWorker || m * n * k < (1 << 16)) {
    fn(x, k, w, s, phase, y, n, m, n, k, t);
    return;
  }
  pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int) {
    const int64_t r = phase + lo;
    fn(x, k, w + lo * k, s + r / kFp8Block * kb, r % kFp8Block, y + lo, n, m, hi - lo, k, t);
  });
}

}  // namespace mx
