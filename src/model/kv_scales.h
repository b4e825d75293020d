// FP8 KV-cache scales from a checkpoint (mxfp4-and-fp8.md §6.3): one fp32 scale per attention
// layer (the main layers and the MTP layer), stored as `fp8(row / scale)` and read as
// `fp8 · scale`. MLA caches one latent row per token, so a layer's scale is its k scale; a
// v scale given beside it (vLLM's convention) is folded in by taking the larger, which never
// saturates more than either alone. Accepted names, per layer L (model.layers.L.self_attn.):
//   attn.k_scale, k_scale, attn.kv_scale, kv_scale (vLLM / sglang), kv_a_proj_with_mqa
//   .output_scale (Quark export), and attn.v_scale / v_scale.
// Scalars or shape [1]; F32, BF16 or F16.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/checkpoint.h"
#include "io/model_config.h"

namespace mx {

// True when `name` is one of the names above for a layer of `c`.
bool IsKvScaleTensor(const std::string& name, const ModelConfig& c);

// Per layer (num_hidden_layers + the MTP layer when present), or empty when the checkpoint has
// none. Errors name the tensor: a scale that is not finite and positive, a bad shape or dtype;
// and main layers with scales beside main layers without (a partial export). The MTP layer
// alone without one gets 1.0 and `*warning` says so.
Result<std::vector<float>> LoadKvScales(const Checkpoint& ckpt, const ModelConfig& c,
                                        std::string* warning);

}  // namespace mx
