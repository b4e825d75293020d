// Expected tensor names and shapes for GlmMoeDsa / DeepSeek-V3.x checkpoints
// (../shared/reference/glm-moe-dsa.md §2).
#include "model/tensor_plan.h"

#include <charconv>

#include <fmt/format.h>

namespace mx {

const char* TensorCategoryName(TensorCategory c) {
  static constexpr const char* kNames[] = {
      "embed", "attention", "indexer", "dense_mlp", "routed_experts", "shared_experts_router",
      "norms", "mtp",       "head"};
  return kNames[static_cast<int>(c)];
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t D = c.hidden_size, H = c.num_attention_heads;
  const int64_t n_layers = c.num_hidden_layers + (c.num_nextn_predict_layers > 0 ? 1 : 0);
  const int64_t n_tensors_estimate =
      3 + n_layers * (16 + 3 * (c.n_routed_experts + c.n_shared_experts));
  out.reserve(n_tensors_estimate);

  auto add = [&](std::string name, std::vector<int64_t> shape, TensorCategory cat, int layer,
                 DType dtype = DType::kBF16, bool routed = false) {
    out.push_back({std::move(name), std::move(shape), dtype, cat, layer, routed});
  };

  add("model.embed_tokens.weight", {c.vocab_size, D}, TensorCategory::kEmbed, -1);
  for (int64_t l = 0; l < n_layers; ++l) {
    const bool mtp = l == c.num_hidden_layers;
    const int layer = static_cast<int>(l);
    const std::string p = fmt::format("model.layers.{}.", l);
    auto cat = [&](TensorCategory base) { return mtp ? TensorCategory::kMtp : base; };
    if (mtp) {
      add(p + "enorm.weight", {D}, TensorCategory::kMtp, layer);
      add(p + "hnorm.weight", {D}, TensorCategory::kMtp, layer);
      add(p + "eh_proj.weight", {D, 2 * D}, TensorCategory::kMtp, layer);
      add(p + "shared_head.norm.weight", {D}, TensorCategory::kMtp, layer);
    }
    add(p + "input_layernorm.weight", {D}, cat(TensorCategory::kNorms), layer);
    add(p + "post_attention_layernorm.weight", {D}, cat(TensorCategory::kNorms), layer);
    // MLA
    const std::string a = p + "self_attn.";
    add(a + "q_a_proj.weight", {c.q_lora_rank, D}, cat(TensorCategory::kAttention), layer);
    add(a + "q_a_layernorm.weight", {c.q_lora_rank}, cat(TensorCategory::kAttention), layer);
    add(a + "q_b_proj.weight", {H * c.qk_head_dim(), c.q_lora_rank},
        cat(TensorCategory::kAttention), layer);
    add(a + "kv_a_proj_with_mqa.weight", {c.kv_lora_rank + c.qk_rope_head_dim, D},
        cat(TensorCategory::kAttention), layer);
    add(a + "kv_a_layernorm.weight", {c.kv_lora_rank}, cat(TensorCategory::kAttention), layer);
    add(a + "kv_b_proj.weight", {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank},
        cat(TensorCategory::kAttention), layer);
    add(a + "o_proj.weight", {D, H * c.v_head_dim}, cat(TensorCategory::kAttention), layer);
    if (c.is_full_indexer_layer(l)) {
      const std::string ix = a + "indexer.";
      const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
      add(ix + "wq_b.weight", {Hi * Di, c.q_lora_rank}, cat(TensorCategory::kIndexer), layer);
      add(ix + "wk.weight", {Di, D}, cat(TensorCategory::kIndexer), layer);
      add(ix + "k_norm.weight", {Di}, cat(TensorCategory::kIndexer), layer);
      add(ix + "k_norm.bias", {Di}, cat(TensorCategory::kIndexer), layer);
      add(ix + "weights_proj.weight", {Hi, D}, cat(TensorCategory::kIndexer), layer);
    }
    const std::string m = p + "mlp.";
    if (!c.is_moe_layer(l)) {
      const int64_t F = c.intermediate_size;
      add(m + "gate_proj.weight", {F, D}, cat(TensorCategory::kDenseMlp), layer);
      add(m + "up_proj.weight", {F, D}, cat(TensorCategory::kDenseMlp), layer);
      add(m + "down_proj.weight", {D, F}, cat(TensorCategory::kDenseMlp), layer);
      continue;
    }
    const int64_t F = c.moe_intermediate_size, E = c.n_routed_experts;
    add(m + "gate.weight", {E, D}, cat(TensorCategory::kSharedExpertsRouter), layer);
    add(m + "gate.e_score_correction_bias", {E}, cat(TensorCategory::kSharedExpertsRouter), layer,
        DType::kF32);
    if (c.n_shared_experts > 0) {
      const int64_t Fs = F * c.n_shared_experts;
      const std::string s = m + "shared_experts.";
      add(s + "gate_proj.weight", {Fs, D}, cat(TensorCategory::kSharedExpertsRouter), layer);
      add(s + "up_proj.weight", {Fs, D}, cat(TensorCategory::kSharedExpertsRouter), layer);
      add(s + "down_proj.weight", {D, Fs}, cat(TensorCategory::kSharedExpertsRouter), layer);
    }
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = fmt::format("{}experts.{}.", m, e);
      add(x + "gate_proj.weight", {F, D}, cat(TensorCategory::kRoutedExperts), layer, DType::kBF16,
          true);
      add(x + "up_proj.weight", {F, D}, cat(TensorCategory::kRoutedExperts), layer, DType::kBF16,
          true);
      add(x + "down_proj.weight", {D, F}, cat(TensorCategory::kRoutedExperts), layer, DType::kBF16,
          true);
    }
  }
  add("model.norm.weight", {D}, TensorCategory::kNorms, -1);
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, D}, TensorCategory::kHead, -1);
  return out;
}

ParamSummary Summarize(const ModelConfig& c, const std::vector<TensorSpec>& tensors) {
  ParamSummary s;
  int64_t routed_main = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    const int k = static_cast<int>(t.category);
    s.params[k] += n;
    s.bytes[k] += n * static_cast<int64_t>(DTypeSize(t.dtype));
    s.total_bytes += n * static_cast<int64_t>(DTypeSize(t.dtype));
    s.total_params += n;
    if (t.category == TensorCategory::kMtp) {
      s.mtp_params += n;
      ++s.mtp_tensors;
    } else {
      s.main_params += n;
      ++s.main_tensors;
      if (t.routed_expert) routed_main += n;
    }
  }
  // Active: every main parameter except routed experts, plus top-k of n_routed of them.
  s.active_params = s.main_params - routed_main;
  if (c.n_routed_experts > 0) {
    s.active_params += routed_main / c.n_routed_experts * c.num_experts_per_tok;
  }
  return s;
}

KvCacheSize KvCacheBytes(const ModelConfig& c) {
  KvCacheSize k{};
  k.mla_values_per_layer = c.mla_cache_values();
  k.indexer_values_per_layer = c.has_indexer ? c.index_head_dim : 0;
  k.full_indexer_layers = c.num_full_indexer_layers();
  k.values_per_token = c.num_hidden_layers * k.mla_values_per_layer +
                       k.full_indexer_layers * k.indexer_values_per_layer;
  k.bf16_bytes_per_token = 2 * k.values_per_token;
  k.fp8_bytes_per_token = k.values_per_token;
  k.mtp_values_per_token =
      c.num_nextn_predict_layers > 0 ? k.mla_values_per_layer + k.indexer_values_per_layer : 0;
  return k;
}

int64_t LayerOfTensor(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(first, last, layer);
  if (ec != std::errc() || end == first || end == last || *end != '.' || layer < 0) return -1;
  return layer;
}

}  // namespace mx
