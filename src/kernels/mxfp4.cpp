// Activation quantization, the scalar MXFP4 GEMM (the slow twin) and the threaded wrapper.
#include "kernels/mxfp4.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "base/check.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4_tiled.h"

namespace mx {

float E8M0Half(uint8_t e) {
  if (e >= 2) return std::bit_cast<float>(static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(0x00200000u << e);  // 2^-128, 2^-127 (fp32 subnormals)
}

void QuantizeRowQ8(const float* x, int64_t k, BlockQ8* out) {
  MX_CHECK_EQ(k % 32, 0);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    BlockQ8& o = out[b];
    o.d = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::lrintf(xb[i] * inv));
      o.qs[i] = static_cast<int8_t>(std::clamp(q, -127, 127));
      sum += o.qs[i];
    }
    o.sum = sum;
  }
}

Q8Panel::Q8Panel(const BlockQ8* x, int64_t m, int64_t nb)
    : nb_(nb), nbp_((nb + 15) / 16 * 16), buf_(nullptr) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(m, 1) * nbp_ * kBytesPerBlock);
  buf_.reset(static_cast<uint8_t*>(::operator new (bytes, std::align_val_t{64})));
  std::memset(buf_.get(), 0, bytes);
  for (int64_t i = 0; i < m; ++i) {
    uint8_t* row = buf_.get() + i * nbp_ * kBytesPerBlock;  // the layout lo(), hi(), ... read
    int8_t* lo = reinterpret_cast<int8_t*>(row);
    int8_t* hi = reinterpret_cast<int8_t*>(row + nbp_ * 16);
    int32_t* bias = reinterpret_cast<int32_t*>(row + nbp_ * 32);
    float* d = reinterpret_cast<float*>(row + nbp_ * 48);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8& xb = x[i * nb + b];
      std::memcpy(lo + b * 16, xb.qs, 16);
      std::memcpy(hi + b * 16, xb.qs + 16, 16);
      for (int l = 0; l < 4; ++l) {
        int32_t s = 0;
        for (int t = 4 * l; t < 4 * l + 4; ++t) s += xb.qs[t] + xb.qs[16 + t];
        bias[b * 4 + l] = -12 * s;
      }
      d[b] = xb.d;
    }
  }
}

void Q8Panel::Free::operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{64}); }

namespace ref {

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, float* y,
               int64_t ldy, int64_t n, int64_t k, GemmTiling /*t: loop order only*/) {
  static constexpr int8_t kLut[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const int64_t nb = k / 32;
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* qj = wq + j * (k / 2);
    const uint8_t* ej = we + j * nb;
    for (int64_t i = 0; i < m; ++i) {
      const BlockQ8* xi = x + i * nb;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t s = 0;
        for (int t = 0; t < 16; ++t) {
          const uint8_t byte = qj[b * 16 + t];
          s += kLut[byte & 0xf] * xi[b].qs[t] + kLut[byte >> 4] * xi[b].qs[t + 16];
        }
        acc += xi[b].d * E8M0Half(ej[b]) * static_cast<float>(s);
      }
      y[i * ldy + j] = acc;
    }
  }
}

}  // namespace ref

void GemmMxfp4(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
               const uint8_t* wq, const uint8_t* we, int64_t n, float* y, GemmTiling t) {
  MX_CHECK_EQ(k % 32, 0);
  std::fill(y, y + m * n, std::numeric_limits<float>::quiet_NaN());
  const int64_t nb = k / 32;
  std::vector<BlockQ8> xq(m * nb);  // [m, k/32]
  // Rows quantized on the pool: serially this took a third of a 512-row prefill GEMM's time
  // and kept the second thread idle.
  pool.parallel_for(0, m, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) QuantizeRowQ8(x + i * k, k, xq.data() + i * nb);
  });
  const GemmMxfp4Fn fn = kt.gemm_mxfp4 != nullptr ? kt.gemm_mxfp4 : ref::GemmMxfp4;
  constexpr int64_t kMinRowsPerWorker = 16;
  if (pool.size() <= 1 || n < 2 * kMinRowsPerWorker || m * n * k < (1 << 16)) {
    fn(xq.data(), m, wq, we, y, n, n, k, t);
    return;
  }
  pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int) {
    fn(xq.data(), m, wq + lo * (k / 2), we + lo * nb, y + lo, n, hi - lo, k, t);
  });
}

}  // namespace mx
