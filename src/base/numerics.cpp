// Scalar codecs for f16, FP8 E4M3 (fn / fnuz) and E2M1.
#include "base/numerics.h"

#include <limits>

namespace mx {

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24, exact in fp32
      float v = static_cast<float>(man) * 0x1p-24f;
      return sign ? -v : v;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t F32ToF16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal half (or zero); exact RNE via fp32 add
    // note: adding 0.5 (2^-1) aligns the f16 subnormal quantum 2^-24 to the fp32 ulp of 0.5,
    // so the FPU's own round-to-nearest-even does the rounding.
    float a = std::bit_cast<float>(abs) + 0.5f;
    uint32_t m = std::bit_cast<uint32_t>(a) - 0x3f000000u;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);  // RNE on the 13 dropped bits
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

namespace {

// Generic E4M3 decode for bias 7 (fn) or 8 (fnuz); NaN handling is done by the callers.
float E4M3Decode(uint8_t v, int bias) {
  const int exp = (v >> 3) & 0xf;
  const int man = v & 0x7;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(man), 1 - bias - 3);
  } else {
    mag = std::ldexp(static_cast<float>(8 + man), exp - bias - 3);
  }
  return (v & 0x80) ? -mag : mag;
}

// Encode |f| (finite, already clamped to the format max) with RNE; returns the 7-bit magnitude.
uint8_t E4M3EncodeMagnitude(float a, int bias) {
  // Smallest normal exponent is 1 - bias; the subnormal quantum is 2^(1 - bias - 3).
  const float quantum_sub = std::ldexp(1.0f, 1 - bias - 3);
  const float min_normal = std::ldexp(1.0f, 1 - bias);
  if (a < min_normal) {
    // note: nearbyint uses the current rounding mode, round-to-nearest-even by default.
    const float q = std::nearbyint(a / quantum_sub);  // 0..8; 8 means min normal
    return static_cast<uint8_t>(q);                   // code 8 = exp 1, man 0 = min normal
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int exp_unbiased = e - 1;
  const float quantum = std::ldexp(1.0f, exp_unbiased - 3);
  const float q = std::nearbyint(a / quantum);  // 8..16
  int exp_field = exp_unbiased + bias;
  int man = static_cast<int>(q) - 8;
  if (man == 8) {
    man = 0;
    ++exp_field;
  }
  return static_cast<uint8_t>((exp_field << 3) | man);
}

}  // namespace

float Fp8E4M3FnToF32(uint8_t v) {
  if ((v & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  return E4M3Decode(v, 7);
}

float Fp8E4M3FnuzToF32(uint8_t v) {
  if (v == 0x80) return std::numeric_limits<float>::quiet_NaN();
  return E4M3Decode(v, 8);
}

uint8_t F32ToFp8E4M3Fn(float f) {
  const bool neg = std::signbit(f);
  if (std::isnan(f)) return neg ? 0xff : 0x7f;
  float a = std::fabs(f);
  if (a > 448.0f) a = 448.0f;
  const uint8_t mag = E4M3EncodeMagnitude(a, 7);
  return static_cast<uint8_t>((neg ? 0x80 : 0) | mag);
}

uint8_t F32ToFp8E4M3Fnuz(float f) {
  if (std::isnan(f)) return 0x80;
  const bool neg = std::signbit(f);
  float a = std::fabs(f);
  if (a > 240.0f) a = 240.0f;
  const uint8_t mag = E4M3EncodeMagnitude(a, 8);
  if (mag == 0) return 0;  // no negative zero in fnuz
  return static_cast<uint8_t>((neg ? 0x80 : 0) | mag);
}

uint8_t F32ToE2M1(float f) {
  if (std::isnan(f)) return 0;
  const uint8_t sign = std::signbit(f) ? 0x8 : 0;
  const float a = std::fabs(f);
  // Midpoints between magnitudes {0,0.5,1,1.5,2,3,4,6}; at a tie pick the even code.
  uint8_t code;
  if (a < 0.25f)
    code = 0;
  else if (a == 0.25f)
    code = 0;  // tie 0 / 0.5 -> 0 (even)
  else if (a < 0.75f)
    code = 1;
  else if (a == 0.75f)
    code = 2;  // tie 0.5 / 1 -> 1.0 (code 2, even)
  else if (a < 1.25f)
    code = 2;
  else if (a == 1.25f)
    code = 2;  // tie 1 / 1.5 -> 1.0
  else if (a < 1.75f)
    code = 3;
  else if (a == 1.75f)
    code = 4;  // tie 1.5 / 2 -> 2.0
  else if (a < 2.5f)
    code = 4;
  else if (a == 2.5f)
    code = 4;  // tie 2 / 3 -> 2.0
  else if (a < 3.5f)
    code = 5;
  else if (a == 3.5f)
    code = 6;  // tie 3 / 4 -> 4.0
  else if (a < 5.0f)
    code = 6;
  else if (a == 5.0f)
    code = 6;  // tie 4 / 6 -> 4.0
  else
    code = 7;  // > 5 rounds to 6; beyond 6 saturates
  return static_cast<uint8_t>(sign | code);
}

}  // namespace mx
