// The FP8 packed layout, the scalar GEMM over it (the FMA levels' twin) and the threaded
// wrapper (fp8.h).
#include "kernels/fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/numerics.h"
#include "kernels/kernels.h"

namespace mx {

void PackFp8(const uint8_t* w, int64_t ldw, const float* s, int64_t phase, int64_t n, int64_t k,
             uint8_t* wp, float* sp) {
  const int64_t nq = Fp8Quads(k), kb = Fp8ScaleCols(k);
  std::memset(wp, 0, static_cast<size_t>(Fp8PackedBytes(n, k)));
  std::fill(sp, sp + Fp8PackedScales(n, k), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t g = r / kFp8RowGroup, l = r % kFp8RowGroup;
    uint8_t* out = wp + g * nq * kFp8QuadBytes;
    const uint8_t* row = w + r * ldw;
    for (int64_t c = 0; c < k; ++c) {
      const int64_t j = 2 * l + c % 2;
      out[(c / 4) * kFp8QuadBytes + 16 * (j / 8) + 8 * ((c / 2) % 2) + j % 8] = row[c];
    }
    const float* srow = s + (phase + r) / kFp8Block * kb;
    for (int64_t b = 0; b < kb; ++b) {
      const uint8_t* blk = row + b * kFp8Block;
      const int64_t len = std::min(kFp8Block, k - b * kFp8Block);
      const bool nan = std::any_of(blk, blk + len, [](uint8_t c) { return (c & 0x7f) == 0x7f; });
      sp[(g * kb + b) * kFp8RowGroup + l] =
          nan ? std::numeric_limits<float>::quiet_NaN() : srow[b] * 256.0f;
    }
  }
}

uint16_t Fp8CodeToBf16Scaled(uint8_t c) {
  const uint16_t sign = static_cast<uint16_t>((c & 0x80) << 8);
  const int e = (c >> 3) & 0xf, m = c & 7;
  if (e == 0) {  // subnormal: m · 2^-9 · 2^-8, exact in bf16 (m has at most 3 bits)
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(m * 0x1p-17f) >> 16));
  }
  return static_cast<uint16_t>(sign | (112 + e) << 7 | m << 4);
}

namespace ref {

namespace {

template <bool kRound>
void PackedFp8(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
               int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int64_t kb = Fp8ScaleCols(k), kq = 4 * Fp8Quads(k);
  auto xv = [&](int64_t i, int64_t c) {
    const float v = c < k ? x[i * ldx + c] : 0.0f;
    return kRound ? Bf16ToF32(F32ToBf16(v)) : v;
  };
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = r0; j < r1; ++j) {
      const float* sj = sp + (j / kFp8RowGroup * kb) * kFp8RowGroup + j % kFp8RowGroup;
      float acc = 0.0f;
      for (int64_t b = 0; b < kb; ++b) {
        float e = 0.0f, o = 0.0f;
        for (int64_t c = b * kFp8Block; c < std::min(kq, (b + 1) * kFp8Block); c += 2) {
          e = std::fma(xv(i, c), Bf16ToF32(Fp8CodeToBf16Scaled(Fp8PackedAt(wp, k, j, c))), e);
          o = std::fma(xv(i, c + 1), Bf16ToF32(Fp8CodeToBf16Scaled(Fp8PackedAt(wp, k, j, c + 1))),
                       o);
        }
        acc = std::fma(e + o, sj[b * kFp8RowGroup], acc);
      }
      y[i * ldy + (j - r0)] = acc;
    }
  }
}

}  // namespace

void GemmFp8(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp, int64_t k,
             int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling) {
  PackedFp8<false>(x, ldx, m, wp, sp, k, r0, r1, y, ldy);
}

void GemmFp8X16(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling) {
  PackedFp8<true>(x, ldx, m, wp, sp, k, r0, r1, y, ldy);
}

}  // namespace ref

void GemmFp8(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
             const uint8_t* wp, const float* sp, int64_t n, float* y, GemmTiling t) {
  std::fill(y, y + m * n, std::numeric_limits<float>::quiet_NaN());
  const GemmFp8Fn fn = kt.gemm_fp8;
  MX_CHECK_MSG(fn != nullptr, "the kernel table has no gemm_fp8");
  const int64_t groups = Fp8Groups(n);
  if (pool.size() <= 1 || groups < 2 || m * n * k < (1 << 16)) {
    fn(x, k, m, wp, sp, k, 0, n, y, n, t);
    return;
  }
  pool.parallel_for(0, groups, [&](int64_t lo, int64_t hi, int) {
    const int64_t r0 = lo * kFp8RowGroup, r1 = std::min(hi * kFp8RowGroup, n);
    fn(x, k, m, wp, sp, k, r0, r1, y + r0, n, t);
  });
}

}  // namespace mx
