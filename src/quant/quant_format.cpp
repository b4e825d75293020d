// The QuantFormat table.
#include "quant/quant_format.h"

#include <array>
#include <string>

namespace mx::quant {

namespace {

const std::array<QuantFormat, 1> kFormats = {{
    {"mxfp4", kMxBlock, kMxBlock / 2, "_scale", QuantizeRowBf16, QuantizeRow, DequantizeRow},
}};

}  // namespace

std::span<const QuantFormat> QuantFormats() { return kFormats; }

const QuantFormat& Mxfp4Format() { return kFormats[0]; }

Result<const QuantFormat*> FindQuantFormat(std::string_view name) {
  std::string names;
  for (const QuantFormat& f : kFormats) {
    if (name == f.name) return &f;
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  return InvalidArgument("--format {}: unknown quantized format (supported: {})", name, names);
}

}  // namespace mx::quant
