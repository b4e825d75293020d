// Matches a checkpoint's tensors against the expected list of its config: decides each
// tensor's storage format from what is in the file (bf16/f16/f32; fp8 e4m3 with an F32
// weight_scale_inv per 128 x 128 block; MXFP4 as uint8 [out, in/2] + uint8 weight_scale [out,
// in/32]) and lists every missing, unexpected and mis-shaped tensor (all of them, not the first).
#pragma once

#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/tensor_plan.h"

namespace mx {

enum class WeightFormat : uint8_t { kMissing, kBF16, kF16, kF32, kFP8, kMXFP4, kMismatch };
const char* WeightFormatName(WeightFormat f);  // "bf16", "mxfp4", ...

struct TensorMatch {
  const TensorSpec* spec;
  const TensorView* view;   // null when missing
  const TensorView* scale;  // MXFP4 weight_scale / fp8 weight_scale_inv, else null
  WeightFormat format;
};

struct CheckpointReport {
  std::vector<TensorMatch> matches;     // one per expected tensor, in expected order
  std::vector<std::string> missing;     // expected names not found
  std::vector<std::string> mismatched;  // "name: expected BF16 [a, b], found U8 [a, c]"
  std::vector<std::string> unexpected;  // in the file, not expected, not a scale
  std::vector<std::string> ignored;     // indexer weights on IndexShare "shared" layers
  std::vector<std::string> kv_scales;   // FP8 KV-cache scales (model/kv_scales.h)
  bool ok() const { return missing.empty() && mismatched.empty() && unexpected.empty(); }
  // One message listing every problem (for the loader's error and `inspect`).
  std::string ProblemSummary(size_t max_per_kind = 50) const;
};

CheckpointReport CheckCheckpoint(const ModelConfig& config, const std::vector<TensorSpec>& specs,
                                 const Checkpoint& ckpt);

std::string ShapeString(const std::vector<int64_t>& shape);  // "[576, 6144]"

}  // namespace mx
