// AVX-512 FP8 block-scaled GEMM (see fp8.h; loop order fp8_tiled.h). Per 16 columns of a W row:
// vpmovsxbd of the 16 e4m3 bytes, << 20 and a mask put sign, exponent and mantissa where an
// fp32 has them (the value times 2^-120, exact, subnormal codes included), and one multiply by
// the block's scale · 2^120 gives fp32(value · scale) exactly as the ref rounds it (a scale
// of 2^8 or more, where scale · 2^120 would overflow, takes two multiplies instead). A tile of
// MR activation rows shares each decoded vector; each output keeps two accumulators (even and
// odd 16-column chunks) reduced by one fixed tree, whatever the tile. Each 64 bytes of a W row
// are checked once for NaN codes (S.1111.111: the byte | 0x80 is 0xff), which make that row's
// outputs NaN as in the ref. The tail of a row loads under masks.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/fp8.h"
#include "kernels/fp8_tiled.h"

// note: GCC 12's AVX-512 intrinsics start from a self-initialised undefined vector, which
// -W(maybe-)uninitialized reports at every inlined use (as in mxfp4_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mx::avx512 {

namespace {

// How far ahead in its W row each 64-byte step prefetches (W rows are contiguous; a few
// rows are streamed side by side in a GEMV).
constexpr int64_t kPrefetchAhead = 2048;

struct Tile {
  // W rows per pass: four for a single activation row (four weight streams in flight and
  // enough independent accumulators to hide the FMA latency), two with a row tile.
  template <int MR>
  static constexpr int kWRows = MR == 1 ? 4 : 2;

  template <int MR, int NR>
  static void Run(const float* x, int64_t ldx, const uint8_t* w, int64_t k,
                  const float* const (&sc)[NR], float* y, int64_t ldy) {
    const __m512i field = _mm512_set1_epi32(static_cast<int32_t>(0x87F00000u));
    const __m512i top = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i ones = _mm512_set1_epi8(static_cast<char>(0xff));
    __m512 acc[2][NR][MR];
    for (auto& a : acc) {
      for (auto& ac : a) {
        for (auto& v : ac) v = _mm512_setzero_ps();
      }
    }
    __mmask64 nan[NR] = {};
    for (int64_t b0 = 0; b0 < k; b0 += kFp8Block) {
      const int64_t end = std::min(b0 + kFp8Block, k);
      __m512 c1[NR], c2[NR];
      bool big = false;
      for (int c = 0; c < NR; ++c) {
        const float sv = sc[c][b0 / kFp8Block];
        if (std::fabs(sv) < 256.0f) {
          c1[c] = _mm512_set1_ps(sv * 0x1p120f);
          c2[c] = _mm512_set1_ps(1.0f);
        } else {  // large, inf or NaN: value first, then the scale
          c1[c] = _mm512_set1_ps(0x1p120f);
          c2[c] = _mm512_set1_ps(sv);
          big = true;
        }
      }
      // Columns [col, col + 16) (fewer under mask mk) into accumulator set A.
      auto chunk = [&]<int A>(int64_t col, __mmask16 mk, bool full) {
        __m512 f[NR];
        for (int c = 0; c < NR; ++c) {
          const uint8_t* p = w + c * k + col;
          const __m128i bytes = full ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                                     : _mm_maskz_loadu_epi8(mk, p);
          const __m512i bits =
              _mm512_and_si512(_mm512_slli_epi32(_mm512_cvtepi8_epi32(bytes), 20), field);
          f[c] = _mm512_mul_ps(_mm512_castsi512_ps(bits), c1[c]);
          if (big) f[c] = _mm512_mul_ps(f[c], c2[c]);
        }
        for (int r = 0; r < MR; ++r) {
          const float* xr = x + r * ldx + col;
          const __m512 xv = full ? _mm512_loadu_ps(xr) : _mm512_maskz_loadu_ps(mk, xr);
          for (int c = 0; c < NR; ++c) acc[A][c][r] = _mm512_fmadd_ps(xv, f[c], acc[A][c][r]);
        }
      };
      int64_t t = b0;
      for (; t + 64 <= end; t += 64) {
        for (int c = 0; c < NR; ++c) {
          const uint8_t* p = w + c * k + t;
          _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead), _MM_HINT_T0);
          const __m512i v = _mm512_loadu_si512(p);
          nan[c] |= _mm512_cmpeq_epi8_mask(_mm512_or_si512(v, top), ones);
        }
        chunk.template operator()<0>(t, 0xffff, true);
        chunk.template operator()<1>(t + 16, 0xffff, true);
        chunk.template operator()<0>(t + 32, 0xffff, true);
        chunk.template operator()<1>(t + 48, 0xffff, true);
      }
      if (t < end) {  // 1..63 columns left (the row's end)
        const int left = static_cast<int>(end - t);
        const __mmask64 mk = left == 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
        for (int c = 0; c < NR; ++c) {
          const __m512i v = _mm512_maskz_loadu_epi8(mk, w + c * k + t);
          nan[c] |= _mm512_mask_cmpeq_epi8_mask(mk, _mm512_or_si512(v, top), ones);
        }
        // Unrolled so that each chunk's accumulator set is known at compile time.
        auto part = [&](int q) {
          const int cols = std::min(16, left - 16 * q);
          return static_cast<__mmask16>((1u << cols) - 1);
        };
        chunk.template operator()<0>(t, part(0), false);
        if (left > 16) chunk.template operator()<1>(t + 16, part(1), false);
        if (left > 32) chunk.template operator()<0>(t + 32, part(2), false);
        if (left > 48) chunk.template operator()<1>(t + 48, part(3), false);
      }
    }
    for (int c = 0; c < NR; ++c) {
      for (int r = 0; r < MR; ++r) {
        const float v = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][c][r], acc[1][c][r]));
        y[r * ldy + c] = nan[c] != 0 ? std::numeric_limits<float>::quiet_NaN() : v;
      }
    }
  }
};

}  // namespace

void GemmFp8(const float* x, int64_t ldx, const uint8_t* w, const float* s, int64_t phase, float* y,
             int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t) {
  TiledGemmFp8<Tile>(x, ldx, w, s, phase, y, ldy, m, n, k, t);
}

}  // namespace mx::avx512
