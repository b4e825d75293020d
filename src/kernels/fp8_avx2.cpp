// AVX2 + FMA FP8 block-scaled GEMM (see fp8.h; loop order fp8_tiled.h): the AVX-512 kernel's
// decode on 8 lanes (vpmovsxbd, << 20, mask, one multiply by scale · 2^120, or two for a scale
// of 2^8 or more), two accumulators per output (even and odd 8-column chunks), a NaN-code check
// per 32 bytes. A step of 32 columns that a row's end cuts short runs on zero-padded copies of
// its weights and activations.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/fp8.h"
#include "kernels/fp8_tiled.h"

namespace mx::avx2 {

namespace {

constexpr int64_t kPrefetchAhead = 2048;

inline float Sum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

struct Tile {
  template <int MR>
  static constexpr int kWRows = MR == 1   ? 4
                                : MR == 2 ? 2
                                          : 1;

  template <int MR, int NR>
  static void Run(const float* x, int64_t ldx, const uint8_t* w, int64_t k,
                  const float* const (&sc)[NR], float* y, int64_t ldy) {
    const __m256i field = _mm256_set1_epi32(static_cast<int32_t>(0x87F00000u));
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi8(static_cast<char>(0xff));
    __m256 acc[2][NR][MR];
    for (auto& a : acc) {
      for (auto& ac : a) {
        for (auto& v : ac) v = _mm256_setzero_ps();
      }
    }
    __m256i nan[NR];
    for (auto& v : nan) v = _mm256_setzero_si256();
    for (int64_t b0 = 0; b0 < k; b0 += kFp8Block) {
      const int64_t end = std::min(b0 + kFp8Block, k);
      __m256 c1[NR], c2[NR];
      bool big = false;
      for (int c = 0; c < NR; ++c) {
        const float sv = sc[c][b0 / kFp8Block];
        if (std::fabs(sv) < 256.0f) {
          c1[c] = _mm256_set1_ps(sv * 0x1p120f);
          c2[c] = _mm256_set1_ps(1.0f);
        } else {  // large, inf or NaN: value first, then the scale
          c1[c] = _mm256_set1_ps(0x1p120f);
          c2[c] = _mm256_set1_ps(sv);
          big = true;
        }
      }
      // 32 columns from W rows wr[c] and activation rows xr[r] (rows of the matrices, or the
      // zero-padded copies of a short step).
      auto step = [&](const uint8_t* const(&wr)[NR], const float* const(&xr)[MR]) {
        for (int c = 0; c < NR; ++c) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[c]));
          nan[c] = _mm256_or_si256(nan[c], _mm256_cmpeq_epi8(_mm256_or_si256(v, top), ones));
        }
        auto chunk = [&]<int A>(int off) {
          __m256 f[NR];
          for (int c = 0; c < NR; ++c) {
            const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wr[c] + off));
            const __m256i bits =
                _mm256_and_si256(_mm256_slli_epi32(_mm256_cvtepi8_epi32(bytes), 20), field);
            f[c] = _mm256_mul_ps(_mm256_castsi256_ps(bits), c1[c]);
            if (big) f[c] = _mm256_mul_ps(f[c], c2[c]);
          }
          for (int r = 0; r < MR; ++r) {
            const __m256 xv = _mm256_loadu_ps(xr[r] + off);
            for (int c = 0; c < NR; ++c) acc[A][c][r] = _mm256_fmadd_ps(xv, f[c], acc[A][c][r]);
          }
        };
        chunk.template operator()<0>(0);
        chunk.template operator()<1>(8);
        chunk.template operator()<0>(16);
        chunk.template operator()<1>(24);
      };
      int64_t t = b0;
      for (; t + 32 <= end; t += 32) {
        const uint8_t* wr[NR];
        const float* xr[MR];
        for (int c = 0; c < NR; ++c) {
          wr[c] = w + c * k + t;
          _mm_prefetch(reinterpret_cast<const char*>(wr[c] + kPrefetchAhead), _MM_HINT_T0);
        }
        for (int r = 0; r < MR; ++r) xr[r] = x + r * ldx + t;
        step(wr, xr);
      }
      if (t < end) {  // 1..31 columns left: zero codes and zero activations pad the step
        const int64_t left = end - t;
        alignas(32) uint8_t wb[NR][32] = {};
        alignas(32) float xb[MR][32] = {};
        const uint8_t* wr[NR];
        const float* xr[MR];
        for (int c = 0; c < NR; ++c) {
          std::memcpy(wb[c], w + c * k + t, left);
          wr[c] = wb[c];
        }
        for (int r = 0; r < MR; ++r) {
          std::memcpy(xb[r], x + r * ldx + t, left * sizeof(float));
          xr[r] = xb[r];
        }
        step(wr, xr);
      }
    }
    for (int c = 0; c < NR; ++c) {
      const bool has_nan = !_mm256_testz_si256(nan[c], nan[c]);
      for (int r = 0; r < MR; ++r) {
        const float v = Sum8(_mm256_add_ps(acc[0][c][r], acc[1][c][r]));
        y[r * ldy + c] = has_nan ? std::numeric_limits<float>::quiet_NaN() : v;
      }
    }
  }
};

}  // namespace

void GemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase, float* y,
             int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t) {
  TiledGemmFp8<Tile>(x, ldx, w, s, phase, y, ldy, m, n, k, t);
}

}  // namespace mx::avx2
