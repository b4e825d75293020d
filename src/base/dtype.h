// Element types of tensors as Hugging Face safetensors names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mx {

enum class DType : uint8_t {
  kBF16,
  kF16,
  kF32,
  kF64,
  kF8_E4M3,  // OCP e4m3fn
  kF8_E5M2,
  kU8,
  kI8,
  kI16,
  kI32,
  kI64,
  kBool,
};

// Bytes per element.
size_t DTypeSize(DType t);
// The safetensors spelling: "BF16", "F8_E4M3", "BOOL", ...
const char* DTypeName(DType t);
// Parses a safetensors dtype string; an unknown one is InvalidArgument naming it and the
// supported list.
Result<DType> ParseDType(std::string_view name);

}  // namespace mx
