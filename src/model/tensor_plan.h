// The expected tensor list of a checkpoint, derived from its ModelConfig alone: every HF name
// with its [out, in] shape, dtype in a bf16 checkpoint, and category — the basis for
// `inspect`, the loader's missing/unexpected/mis-shaped check and parameter/byte counts.
// The MTP layer is `model.layers.{num_hidden_layers}.*` as in real checkpoints (no
// embed_tokens / shared_head.head of its own).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "io/model_config.h"

namespace mx {

enum class TensorCategory : uint8_t {
  kEmbed,
  kAttention,  // MLA projections and the q_a / kv_a layernorms
  kIndexer,
  kDenseMlp,
  kRoutedExperts,
  kSharedExpertsRouter,  // shared experts + router gate + correction bias
  kNorms,                // input / post-attention layernorms and the final norm
  kMtp,                  // everything in the MTP layer
  kHead,
  kCount,
};
constexpr int kNumTensorCategories = static_cast<int>(TensorCategory::kCount);
const char* TensorCategoryName(TensorCategory c);  // "embed", "attention", ...

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // HF [out, in] for linear weights
  DType dtype;                 // dtype in a bf16 checkpoint (correction bias: F32)
  TensorCategory category;
  int32_t layer;       // -1 for embed / final norm / head
  bool routed_expert;  // one routed expert's weight (counts 1/n_routed * top-k as active)
  int64_t numel() const;
};

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& c);

// L of a checkpoint name "model.layers.L.<rest>", or -1 when `name` has no such prefix or L
// does not fit an int64 (names come from files: never an exception).
int64_t LayerOfTensor(std::string_view name);

struct ParamSummary {
  std::array<int64_t, kNumTensorCategories> params{};
  std::array<int64_t, kNumTensorCategories> bytes{};  // bf16 checkpoint (bias in f32)
  int64_t main_params = 0;
  int64_t mtp_params = 0;
  int64_t total_params = 0;
  int64_t main_tensors = 0;
  int64_t mtp_tensors = 0;
  int64_t active_params = 0;  // per token, main model: all but unrouted experts, embed included
  int64_t total_bytes = 0;
};

ParamSummary Summarize(const ModelConfig& c, const std::vector<TensorSpec>& tensors);

struct KvCacheSize {
  int64_t mla_values_per_layer;      // kv_lora_rank + qk_rope_head_dim
  int64_t indexer_values_per_layer;  // index_head_dim on full layers, 0 otherwise
  int64_t full_indexer_layers;       // main model
  int64_t values_per_token;          // main model, all layers
  int64_t bf16_bytes_per_token;
  int64_t fp8_bytes_per_token;   // fp8 e4m3 latent, rope key and indexer key
  int64_t mtp_values_per_token;  // the MTP layer's own caches
};

KvCacheSize KvCacheBytes(const ModelConfig& c);

}  // namespace mx
