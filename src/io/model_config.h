// HF `config.json` -> one validated ModelConfig for GlmMoeDsaForCausalLM,
// DeepseekV32ForCausalLM and DeepseekV3ForCausalLM. Field names are the HF names verbatim
// (../shared/reference/glm-moe-dsa.md §1). A wrong or inconsistent field is an
// InvalidArgument naming the field and the rule; an unknown architecture lists the supported
// ones. `quantization_config` is kept as raw JSON text for the weight loader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace mx {

enum class Architecture { kGlmMoeDsa, kDeepseekV32, kDeepseekV3 };
enum class MlpType { kDense, kSparse };
enum class IndexerType { kFull, kShared };

const char* ArchitectureName(Architecture a);  // "GlmMoeDsaForCausalLM", ...

struct RopeConfig {
  double rope_theta = 10000.0;
  std::string rope_type = "default";  // "default" or "yarn"
  // yarn only
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct ModelConfig {
  Architecture architecture = Architecture::kGlmMoeDsa;
  std::string model_type;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  std::string dtype = "bfloat16";  // `dtype` or `torch_dtype`

  // MLP / MoE
  int64_t intermediate_size = 0;      // dense FFN width
  int64_t moe_intermediate_size = 0;  // routed and shared expert width
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";
  std::string moe_router_dtype = "float32";
  std::vector<MlpType> mlp_layer_types;  // [num_hidden_layers]

  // MLA
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;
  RopeConfig rope;

  // DSA indexer (absent for DeepseekV3ForCausalLM)
  bool has_indexer = false;
  int64_t index_topk = 0;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk_freq = 1;
  int64_t index_skip_topk_offset = 0;
  bool index_share_for_mtp_iteration = false;
  bool indexer_rope_interleave = true;
  std::vector<IndexerType> indexer_types;  // [num_hidden_layers]; empty without an indexer

  // MTP
  int64_t num_nextn_predict_layers = 0;

  // Tokens
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  std::optional<int64_t> bos_token_id;

  std::optional<std::string> quantization_config_json;  // raw, for the loader

  // ---- derived ----
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // 1/sqrt(qk_head_dim), times yarn mscale^2 when rope_type is yarn and mscale_all_dim > 0.
  double softmax_scale() const;
  bool is_moe_layer(int64_t layer) const;  // layer may be num_hidden_layers (MTP: always MoE)
  // The MTP layer always has its own full indexer.
  bool is_full_indexer_layer(int64_t layer) const;
  int64_t num_full_indexer_layers() const;  // main model only
  int64_t mla_cache_values() const { return kv_lora_rank + qk_rope_head_dim; }
  int64_t mtp_layer_index() const { return num_hidden_layers; }
};

// `source` names the file in error messages.
Result<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source);
Result<ModelConfig> LoadModelConfig(const std::string& path);

}  // namespace mx
