// What loading a checkpoint will hold in memory, worked out from its config and safetensors
// headers alone (no tensor data is read): for one rank's part of the model (model/shard.h),
// the bytes each weight format takes in the checkpoint, the bytes it will hold in anonymous
// memory once loaded (repacked, converted, sliced or derived copies) and the bytes it will use
// in place from the mapped file. It mirrors LoadModelWeights (weights.cpp) and the format
// table (weight_format.cpp): weight_plan_test checks it against what a load actually holds.
//
// Where the weights live (the same at every kernel level: ref, AVX2 and AVX-512 read the same
// packed layouts, chosen at load before any kernel runs):
//   bf16 matrices     repacked into 16-row groups of k-pairs (kernels/bf16_packed.h), a copy;
//   f16 / f32         converted to f32, a copy;
//   MXFP4             Quark codes repacked into 16-row groups with their E8M0 scales, a copy;
//   FP8               packed into 16-row groups with per-row scales, a copy; the stored e4m3
//                     codes (and the scales when 4-byte aligned) stay mapped and are read only
//                     while loading (slices, MLA's absorbed key weight);
//   norm vectors      f32 copies (and the router's correction bias);
//   derived           MLA's absorbed key weight kv_b_uk_t per layer (bf16 when kv_b_proj is
//                     bf16, else f32), computed at load.
// Under tensor parallelism a sliced tensor is read whole, then sliced: its whole packed form is
// the largest transient of the load (`largest_transient_bytes`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/shard.h"

namespace mx {

// One row of the plan: the tensors of one format and where they live.
struct WeightFormatPlan {
  std::string format;        // "bf16", "f16", "f32", "mxfp4", "fp8", "vectors", "derived"
  std::string where;         // one line: "repacked (16-row groups)", ...
  int64_t tensors = 0;       // tensors of this rank in this format (scales not counted)
  int64_t file_bytes = 0;    // their bytes in the checkpoint, scales included (whole tensors)
  int64_t anon_bytes = 0;    // held in anonymous memory after the load
  int64_t mapped_bytes = 0;  // used in place from the mapped checkpoint (not copied)
};

struct WeightPlan {
  ModelShard shard;
  std::vector<WeightFormatPlan> formats;  // only formats with tensors, in a fixed order
  int64_t file_bytes = 0;                 // sums over `formats`
  int64_t anon_bytes = 0;
  int64_t mapped_bytes = 0;
  int64_t tensors = 0;  // tensors read from the checkpoint (the derived ones not counted)
  // The largest temporary one tensor's load holds beside the result (an MXFP4 tensor's
  // reordered codes, a misaligned bf16 tensor's aligned copy, a sliced tensor's whole form).
  int64_t largest_transient_bytes = 0;
};

// The plan of `shard` of the checkpoint `ckpt` with config `config`. Errors: those
// LoadModelWeights would report before reading data (CheckShardable; CheckCheckpoint's missing,
// unexpected or mis-shaped tensors; CheckQuantization's disagreements), so a plan that is Ok
// is a checkpoint whose load gets past its checks.
Result<WeightPlan> PlanWeights(const ModelConfig& config, const Checkpoint& ckpt,
                               const ModelShard& shard = {});

}  // namespace mx
