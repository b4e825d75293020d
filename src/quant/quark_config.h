// The `quantization_config` block of an MXFP4 checkpoint in AMD Quark's export schema
// (../shared/reference/mxfp4-and-fp8.md §3.5): written by the quantizer, read back by the
// loader to cross-check what each tensor in the file is.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "quant/mxfp4.h"

namespace mx::quant {

// quant_method "quark", global weight spec fp4 / per_group / group 32 / e8m0 with the given
// scale_calculation_mode and round_method "half_even", input_tensors null (weight-only; the
// CPU kernels quantize activations to int8), and the exclude list as given.
nlohmann::ordered_json MakeQuarkConfig(ScaleMode mode, const std::vector<std::string>& exclude);

// What the loader needs from a config.json's quantization_config.
struct QuantConfigInfo {
  std::string quant_method;   // "quark", "fp8", ...
  bool weight_mxfp4 = false;  // global weight spec is fp4 (or mx + fp4) per_group 32
  std::optional<ScaleMode> scale_mode;
  std::vector<std::string> exclude;  // as written (fp8: ignored_layers, modules_to_not_convert)
  // quant_method "fp8" (DeepSeek / HF FineGrainedFP8): weight_block_size as written (empty when
  // absent) and fmt ("e4m3" when absent).
  std::vector<int64_t> weight_block_size;
  std::string fp8_fmt;
};

// `json_text` is the raw quantization_config object. Errors: InvalidArgument naming the
// field for a malformed block (exclude / ignored_layers not a list of strings, group_size not 32
// for fp4, weight_block_size not a list of two positive integers, fmt not a string).
Result<QuantConfigInfo> ParseQuantConfig(std::string_view json_text);

}  // namespace mx::quant
