// The packed bf16 layout, the scalar GEMM over it (the FMA levels' twin) and the threaded
// wrapper (bf16_packed.h).
#include "kernels/bf16_packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx {

void PackBf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, uint16_t* wp) {
  const int64_t kp = Bf16Pairs(k);
  std::memset(wp, 0, static_cast<size_t>(Bf16PackedElems(n, k)) * sizeof(uint16_t));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t g = j / kBf16RowGroup, l = j % kBf16RowGroup;
    uint16_t* out = wp + g * kp * 2 * kBf16RowGroup + 2 * l;
    for (int64_t c = 0; c < k; ++c) out[(c / 2) * 2 * kBf16RowGroup + c % 2] = w[j * ldw + c];
  }
}

namespace ref {

namespace {

template <bool kRound>
void Packed(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k, int64_t r0,
            int64_t r1, float* y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = r0; j < r1; ++j) {
      float acc = 0.0f;
      for (int64_t c = 0; c < Bf16Pairs(k) * 2; ++c) {
        const float v = c < k ? x[i * ldx + c] : 0.0f;
        const float xv = kRound ? Bf16ToF32(F32ToBf16(v)) : v;
        acc = std::fma(xv, Bf16ToF32(Bf16PackedAt(wp, k, j, c)), acc);
      }
      y[i * ldy + (j - r0)] = acc;
    }
  }
}

}  // namespace

void GemmBf16Packed(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                    int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling) {
  Packed<false>(x, ldx, m, wp, k, r0, r1, y, ldy);
}

void GemmBf16PackedX16(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                       int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling) {
  Packed<true>(x, ldx, m, wp, k, r0, r1, y, ldy);
}

}  // namespace ref

void GemmBf16Packed(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
                    const uint16_t* wp, int64_t n, float* y, GemmTiling t) {
  std::fill(y, y + m * n, std::numeric_limits<float>::quiet_NaN());
  const GemmBf16PackedFn fn = kt.gemm_bf16_packed;
  MX_CHECK_MSG(fn != nullptr, "the kernel table has no gemm_bf16_packed");
  const int64_t groups = Bf16Groups(n);
  if (pool.size() <= 1 || groups < 2 || m * n * k < (1 << 16)) {
    fn(x, k, m, wp, k, 0, n, y, n, t);
    return;
  }
  // Chunks of groups from a shared counter (about 4 per thread): a thread the host slowed down
  // takes fewer instead of making the others wait at the end (a decode step's GEMVs).
  const int64_t grain = std::max<int64_t>(1, groups / (4 * pool.size()));
  pool.parallel_for_dynamic(0, groups, grain, [&](int64_t lo, int64_t hi, int) {
    const int64_t r0 = lo * kBf16RowGroup, r1 = std::min(hi * kBf16RowGroup, n);
    fn(x, k, m, wp, k, r0, r1, y + r0, n, t);
  });
}

}  // namespace mx
