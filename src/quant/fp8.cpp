// FP8 block-scaled codec (see fp8.h).
#include "quant/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/numerics.h"

namespace mx::quant {

Status Fp8EncodePanel(const float* x, int64_t rows, int64_t k, int64_t row0, uint8_t* codes,
                      uint8_t* scales) {
  for (int64_t b0 = 0; b0 < k; b0 += kFp8BlockSize) {
    const int64_t b1 = std::min(b0 + kFp8BlockSize, k);
    float amax = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = b0; t < b1; ++t) {
        const float v = x[r * k + t];
        if (!std::isfinite(v)) {
          return InvalidArgument("row {}: non-finite value {} at column {}", row0 + r, v, t);
        }
        amax = std::max(amax, std::fabs(v));
      }
    }
    float s = amax / 448.0f;
    if (s == 0.0f) s = 1.0f;
    std::memcpy(scales + b0 / kFp8BlockSize * sizeof(float), &s, sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = b0; t < b1; ++t) codes[r * k + t] = F32ToFp8E4M3Fn(x[r * k + t] / s);
    }
  }
  return Status::Ok();
}

void Fp8DecodePanel(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t k,
                    float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < k; ++t) {
      float s;
      std::memcpy(&s, scales + t / kFp8BlockSize * sizeof(float), sizeof(float));
      out[r * k + t] = Fp8E4M3FnToF32(codes[r * k + t]) * s;
    }
  }
}

}  // namespace mx::quant
