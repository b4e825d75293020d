// Activation quantization, the packed weight layout, the scalar MXFP4 GEMM (the slow twin) and
// the threaded wrapper.
#include "kernels/mxfp4.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "base/check.h"
#include "kernels/kernels.h"

namespace mx {

float E8M0Half(uint8_t e) {
  if (e >= 2) return std::bit_cast<float>(static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(0x00200000u << e);  // 2^-128, 2^-127 (fp32 subnormals)
}

namespace {

void QuantizeBlocksScalar(const float* x, int64_t k, BlockQ8* out) {
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

#if defined(__AVX2__)
// The same arithmetic 8 lanes at a time (cvtps rounds half to even, as lrintf does by default).
void QuantizeBlocksAvx2(const float* x, int64_t k, BlockQ8* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    BlockQ8& o = out[b];
    o.d = amax / 127.0f;
    const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv)), nlim),
                              lim);
    }
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    o.sum = _mm_cvtsi128_si32(s4);
    const __m256i w16 =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs), _mm256_permutevar8x32_epi32(w16, order));
  }
}
#endif

}  // namespace

void QuantizeRowQ8(const float* x, int64_t k, BlockQ8* out) {
  MX_CHECK_EQ(k % 32, 0);
#if defined(__AVX2__)
  QuantizeBlocksAvx2(x, k, out);
#else
  QuantizeBlocksScalar(x, k, out);
#endif
}

namespace ref {
void QuantizeRowQ8(const float* x, int64_t k, BlockQ8* out) {
  MX_CHECK_EQ(k % 32, 0);
  QuantizeBlocksScalar(x, k, out);
}
}  // namespace ref

void PackMxfp4(const uint8_t* q, const uint8_t* e, int64_t n, int64_t k, uint8_t* pq, uint8_t* pe) {
  MX_CHECK_EQ(k % 32, 0);
  const int64_t nb = k / 32;
  std::memset(pq, 0, static_cast<size_t>(Mxfp4PackedCodeBytes(n, k)));
  std::memset(pe, 0, static_cast<size_t>(Mxfp4PackedScaleBytes(n, k)));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t g = j / kMxRowGroup, l = j % kMxRowGroup;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* block = pq + (g * nb + b) * kMxGroupBlockBytes + 4 * l;
      for (int s = 0; s < 16; ++s) block[(s / 4) * 64 + s % 4] = q[j * (k / 2) + b * 16 + s];
      pe[(g * nb + b) * kMxRowGroup + l] = e[j * nb + b];
    }
  }
}

void UnpackMxfp4Row(const uint8_t* pq, const uint8_t* pe, int64_t k, int64_t j, uint8_t* q,
                    uint8_t* e) {
  const int64_t nb = k / 32, g = j / kMxRowGroup, l = j % kMxRowGroup;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = pq + (g * nb + b) * kMxGroupBlockBytes + 4 * l;
    for (int s = 0; s < 16; ++s) q[b * 16 + s] = block[(s / 4) * 64 + s % 4];
    e[b] = pe[(g * nb + b) * kMxRowGroup + l];
  }
}

namespace ref {

void GemmMxfp4(const BlockQ8* x, int64_t m, const uint8_t* wq, const uint8_t* we, int64_t k,
               int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling /*t: loop order only*/) {
  static constexpr int8_t kLut[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const int64_t nb = k / 32;
  std::vector<uint8_t> q(k / 2), e(nb);  // row j in split-half order
  for (int64_t j = r0; j < r1; ++j) {
    UnpackMxfp4Row(wq, we, k, j, q.data(), e.data());
    for (int64_t i = 0; i < m; ++i) {
      const BlockQ8* xi = x + i * nb;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t s = 0;
        for (int t = 0; t < 16; ++t) {
          const uint8_t byte = q[b * 16 + t];
          s += kLut[byte & 0xf] * xi[b].qs[t] + kLut[byte >> 4] * xi[b].qs[t + 16];
        }
        acc = std::fma(static_cast<float>(s), xi[b].d * E8M0Half(e[b]), acc);
      }
      y[i * ldy + (j - r0)] = acc;
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
  const int64_t groups = Mxfp4Groups(n);
  if (pool.size() <= 1 || groups < 2 || m * n * k < (1 << 16)) {
    fn(xq.data(), m, wq, we, k, 0, n, y, n, t);
    return;
  }
  // Chunks from a shared counter, as GemmBf16Packed.
  const int64_t grain = std::max<int64_t>(1, groups / (4 * pool.size()));
  pool.parallel_for_dynamic(0, groups, grain, [&](int64_t lo, int64_t hi, int) {
    const int64_t r0 = lo * kMxRowGroup, r1 = std::min(hi * kMxRowGroup, n);
    fn(xq.data(), m, wq, we, k, r0, r1, y + r0, n, t);
  });
}

}  // namespace mx
