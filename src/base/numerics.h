// Scalar number formats used by checkpoints, kernels and caches: bf16 and f16 (round to
// nearest even), FP8 E4M3 in OCP `e4m3fn` (max 448) and `e4m3fnuz` (max 240) with saturating
// encode, E8M0 block scales and E2M1 (FP4) elements. Facts and pitfalls:
// ../shared/reference/mxfp4-and-fp8.md. These are the bit-exact references every vectorized
// kernel is tested against.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace mx {

// ---- bf16 ----------------------------------------------------------------------------------
inline float Bf16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays NaN (quieted, sign kept); overflow rounds to +-inf.
inline uint16_t F32ToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ---- f16 (IEEE binary16) -------------------------------------------------------------------
float F16ToF32(uint16_t h);
// Round to nearest even, subnormals kept, overflow to +-inf, NaN stays NaN.
uint16_t F32ToF16(float f);

// ---- FP8 E4M3 ------------------------------------------------------------------------------
enum class Fp8Kind : uint8_t {
  kE4M3FN,    // OCP: bias 7, max 448, NaN = S.1111.111, has -0
  kE4M3FNUZ,  // bias 8, max 240, NaN = 0x80 only, no -0
};

constexpr float Fp8Max(Fp8Kind k) { return k == Fp8Kind::kE4M3FN ? 448.0f : 240.0f; }

float Fp8E4M3FnToF32(uint8_t v);
float Fp8E4M3FnuzToF32(uint8_t v);
// Saturating encode: |x| beyond the maximum clamps to +-max (never NaN); NaN stays NaN;
// otherwise round to nearest even.
uint8_t F32ToFp8E4M3Fn(float f);
uint8_t F32ToFp8E4M3Fnuz(float f);

inline float Fp8ToF32(uint8_t v, Fp8Kind k) {
  return k == Fp8Kind::kE4M3FN ? Fp8E4M3FnToF32(v) : Fp8E4M3FnuzToF32(v);
}
inline uint8_t F32ToFp8(float f, Fp8Kind k) {
  return k == Fp8Kind::kE4M3FN ? F32ToFp8E4M3Fn(f) : F32ToFp8E4M3Fnuz(f);
}

// ---- E8M0 (MX block scale) -----------------------------------------------------------------
// value = 2^(e - 127); 0xFF = NaN; 0x00 = 2^-127, an fp32 subnormal (bit pattern 0x00400000).
inline float E8M0ToF32(uint8_t e) {
  if (e == 0xff) return std::bit_cast<float>(0x7fc00000u);
  if (e == 0) return std::bit_cast<float>(0x00400000u);
  return std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}

// ---- E2M1 (FP4 element) --------------------------------------------------------------------
// Codes 0..15 = +0 0.5 1 1.5 2 3 4 6 -0 -0.5 -1 -1.5 -2 -3 -4 -6.
inline float E2M1ToF32(uint8_t code) {
  static constexpr float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kValues[code & 0xf];
}
// Round half to even among the 8 magnitudes, saturating at 6; NaN maps to +0 (callers must
// reject NaN before quantizing; the MXFP4 codec does).
uint8_t F32ToE2M1(float f);

}  // namespace mx
