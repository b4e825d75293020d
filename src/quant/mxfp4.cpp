// MXFP4 reference codec (see mxfp4.h).
#include "quant/mxfp4.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/numerics.h"

namespace mx::quant {

const char* ScaleModeName(ScaleMode m) { return m == ScaleMode::kFloor ? "floor" : "even"; }

Result<ScaleMode> ParseScaleMode(std::string_view name) {
  if (name == "floor") return ScaleMode::kFloor;
  if (name == "even") return ScaleMode::kEven;
  return InvalidArgument("unknown MXFP4 scale mode '{}' (want floor or even)", name);
}

uint8_t E8M0ScaleFor(float amax, ScaleMode mode) {
  if (!(amax > 0.0f)) return 0;  // zero block: 2^-127, as Quark
  uint32_t b = std::bit_cast<uint32_t>(amax);
  // note: for a subnormal amax the exponent field is 0, i.e. floor(log2) is taken as -127;
  // the clamp below gives byte 0 either way.
  if (mode == ScaleMode::kEven) b += 0x00200000u;               // round the mantissa to 1 bit
  int e = static_cast<int>((b & 0x7f800000u) >> 23) - 127 - 2;  // floor(log2) - emax_elem
  e = e < -127 ? -127 : (e > 127 ? 127 : e);
  return static_cast<uint8_t>(e + 127);
}

namespace {

// x · 2^(127 − e): exact (a power-of-two multiply), done in two steps so that neither factor
// overflows or underflows for any e in [0, 254].
inline float Unscale(float x, uint8_t e) {
  const int s = 127 - static_cast<int>(e);  // in [-127, 127]
  return std::ldexp(x, s);
}

}  // namespace

Status QuantizeBlock(const float* x, ScaleMode mode, uint8_t codes[kMxBlock], uint8_t* scale) {
  float amax = 0.0f;
  for (int i = 0; i < kMxBlock; ++i) {
    if (!std::isfinite(x[i])) {
      return InvalidArgument("value {} at index {} of an MXFP4 block is not finite", x[i], i);
    }
    amax = std::fmax(amax, std::fabs(x[i]));
  }
  const uint8_t e = E8M0ScaleFor(amax, mode);
  *scale = e;
  for (int i = 0; i < kMxBlock; ++i) codes[i] = F32ToE2M1(Unscale(x[i], e));
  return Status::Ok();
}

void PackQuark(const uint8_t codes[kMxBlock], uint8_t out[kMxBlock / 2]) {
  for (int i = 0; i < kMxBlock / 2; ++i) {
    out[i] = static_cast<uint8_t>((codes[2 * i] & 0xf) | (codes[2 * i + 1] & 0xf) << 4);
  }
}

void PackSplitHalf(const uint8_t codes[kMxBlock], uint8_t out[kMxBlock / 2]) {
  for (int j = 0; j < kMxBlock / 2; ++j) {
    out[j] = static_cast<uint8_t>((codes[j] & 0xf) | (codes[j + 16] & 0xf) << 4);
  }
}

void RepackQuarkToSplitHalf(const uint8_t* in, int64_t n_blocks, uint8_t* out) {
  uint8_t c[kMxBlock];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* p = in + b * (kMxBlock / 2);
    for (int i = 0; i < kMxBlock / 2; ++i) {
      c[2 * i] = p[i] & 0xf;
      c[2 * i + 1] = p[i] >> 4;
    }
    PackSplitHalf(c, out + b * (kMxBlock / 2));
  }
}

Status QuantizeRow(const float* x, int64_t k, ScaleMode mode, uint8_t* packed, uint8_t* scales) {
  if (k % kMxBlock != 0) {
    return InvalidArgument("MXFP4 needs a row length divisible by {}, got {}", kMxBlock, k);
  }
  uint8_t codes[kMxBlock];
  for (int64_t b = 0; b < k / kMxBlock; ++b) {
    Status st = QuantizeBlock(x + b * kMxBlock, mode, codes, scales + b);
    if (!st.ok()) {
      // Re-find the column for the message.
      for (int i = 0; i < kMxBlock; ++i) {
        if (!std::isfinite(x[b * kMxBlock + i])) {
          return InvalidArgument("non-finite value {} at column {}", x[b * kMxBlock + i],
                                 b * kMxBlock + i);
        }
      }
      return st;
    }
    PackQuark(codes, packed + b * (kMxBlock / 2));
  }
  return Status::Ok();
}

Status QuantizeRowBf16(const uint16_t* x, int64_t k, ScaleMode mode, uint8_t* packed,
                       uint8_t* scales) {
  if (k % kMxBlock != 0) {
    return InvalidArgument("MXFP4 needs a row length divisible by {}, got {}", kMxBlock, k);
  }
  float buf[kMxBlock];
  for (int64_t b = 0; b < k / kMxBlock; ++b) {
    for (int i = 0; i < kMxBlock; ++i) buf[i] = Bf16ToF32(x[b * kMxBlock + i]);
    Status st = QuantizeRow(buf, kMxBlock, mode, packed + b * (kMxBlock / 2), scales + b);
    if (!st.ok()) {
      for (int i = 0; i < kMxBlock; ++i) {
        if (!std::isfinite(buf[i])) {
          return InvalidArgument("non-finite value {} at column {}", buf[i], b * kMxBlock + i);
        }
      }
      return st;
    }
  }
  return Status::Ok();
}

void DequantizeRow(const uint8_t* packed, const uint8_t* scales, int64_t k, float* out) {
  MX_CHECK_EQ(k % kMxBlock, 0);
  for (int64_t b = 0; b < k / kMxBlock; ++b) {
    const float X = E8M0ToF32(scales[b]);
    for (int i = 0; i < kMxBlock / 2; ++i) {
      const uint8_t byte = packed[b * (kMxBlock / 2) + i];
      out[b * kMxBlock + 2 * i] = E2M1ToF32(byte & 0xf) * X;
      out[b * kMxBlock + 2 * i + 1] = E2M1ToF32(byte >> 4) * X;
    }
  }
}

}  // namespace mx::quant
