// The QuantFormat table.
#include "quant/quant_format.h"

#include <array>
#include <string>

#include "quant/fp8.h"

namespace mx::quant {

namespace {

Status EncodeMxfp4(const float* x, int64_t rows, int64_t k, ScaleMode mode, int64_t row0,
                   uint8_t* codes, uint8_t* scales) {
  for (int64_t r = 0; r < rows; ++r) {
    const Status st = QuantizeRow(x + r * k, k, mode, codes + r * k / 2, scales + r * k / kMxBlock);
    if (!st.ok()) return InvalidArgument("row {}: {}", row0 + r, st.message());
  }
  return Status::Ok();
}

void DecodeMxfp4(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(codes + r * k / 2, scales + r * k / kMxBlock, k, out + r * k);
  }
}

Status EncodeFp8(const float* x, int64_t rows, int64_t k, ScaleMode, int64_t row0, uint8_t* codes,
                 uint8_t* scales) {
  return Fp8EncodePanel(x, rows, k, row0, codes, scales);
}

const std::array<QuantFormat, 2> kFormats = {{
    {"mxfp4", kMxBlock, 1, kMxBlock / 2, false, DType::kU8, DType::kU8, "_scale", EncodeMxfp4,
     DecodeMxfp4},
    {"fp8", kFp8BlockSize, kFp8BlockSize, kFp8BlockSize, true, DType::kF8_E4M3, DType::kF32,
     "_scale_inv", EncodeFp8, Fp8DecodePanel},
}};

}  // namespace

std::span<const QuantFormat> QuantFormats() { return kFormats; }

const QuantFormat& Mxfp4Format() { return kFormats[0]; }
const QuantFormat& Fp8Format() { return kFormats[1]; }

Result<const QuantFormat*> FindQuantFormat(std::string_view name) {
  std::string names;
  for (const QuantFormat& f : kFormats) {
    if (name == f.name) return &f;
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  return InvalidArgument("--format {}: unknown quantized format (supported: {})", name, names);
}

}  // namespace mx::quant
