// DType names and sizes.
#include "base/dtype.h"

#include <array>

namespace mx {
namespace {

struct DTypeInfo {
  DType type;
  const char* name;
  size_t size;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {DType::kBF16, "BF16", 2},
    {DType::kF16, "F16", 2},
    {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},
    {DType::kF8_E4M3, "F8_E4M3", 1},
    {DType::kF8_E5M2, "F8_E5M2", 1},
    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},
    {DType::kI16, "I16", 2},
    {DType::kI32, "I32", 4},
    {DType::kI64, "I64", 8},
    {DType::kBool, "BOOL", 1},
}};

}  // namespace

size_t DTypeSize(DType t) { return kDTypes[static_cast<size_t>(t)].size; }

const char* DTypeName(DType t) { return kDTypes[static_cast<size_t>(t)].name; }

Result<DType> ParseDType(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.type;
  }
  std::string all;
  for (const auto& d : kDTypes) {
    if (!all.empty()) all += ", ";
    all += d.name;
  }
  return InvalidArgument("unknown dtype '{}' (supported: {})", name, all);
}

}  // namespace mx
