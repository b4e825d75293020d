// The weight-stream prefetch the packed GEMMs (bf16, FP8, MXFP4; AVX2 and AVX-512) share, per
// gemm_tiling.h's kWeightPrefetchAhead: a tile of one activation row (decode) prefetches into L2,
// a tile of several rows into L1 `kTileAhead` bytes ahead.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

#include "kernels/gemm_tiling.h"

namespace mx {

template <bool kLoneRow, int64_t kTileAhead = kPrefillPrefetchAhead>
inline void PrefetchWeights(const void* w) {
  const char* p = static_cast<const char*>(w);
  if constexpr (kLoneRow) {
    _mm_prefetch(p + kWeightPrefetchAhead, _MM_HINT_T1);
  } else {
    _mm_prefetch(p + kTileAhead, _MM_HINT_T0);
  }
}

}  // namespace mx
