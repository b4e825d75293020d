// Parsing and validation of HF config.json for the GlmMoeDsa / DeepSeek-V3.x family.
#include "io/model_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mx {
namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "GlmMoeDsaForCausalLM, DeepseekV32ForCausalLM, DeepseekV3ForCausalLM";

// Reads typed fields from the config object; the first error wins and names the field.
class FieldReader {
 public:
  FieldReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  bool Has(const char* name) const { return j_.contains(name) && !j_[name].is_null(); }

  // Values above max_value are rejected too: a config is outside input, and absurd sizes
  // must fail here rather than as a huge allocation later.
  void Int(const char* name, int64_t* out, bool required, int64_t min_value = 1,
           int64_t max_value = int64_t{1} << 32) {
    if (!Has(name)) {
      if (required) Fail(name, "is required");
      return;
    }
    const json& v = j_[name];
    if (v.is_number_integer() || v.is_number_unsigned()) {
      *out = v.get<int64_t>();
    } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
               std::fabs(v.get<double>()) < 9e15) {
      *out = static_cast<int64_t>(v.get<double>());
    } else {
      Fail(name, "must be an integer, got " + v.dump());
      return;
    }
    if (*out < min_value) Fail(name, fmt::format("must be >= {}, got {}", min_value, *out));
    if (*out > max_value) Fail(name, fmt::format("must be <= {}, got {}", max_value, *out));
  }

  void Float(const char* name, double* out, bool required) {
    if (!Has(name)) {
      if (required) Fail(name, "is required");
      return;
    }
    const json& v = j_[name];
    if (!v.is_number()) {
      Fail(name, "must be a number, got " + v.dump());
      return;
    }
    *out = v.get<double>();
    if (!std::isfinite(*out)) Fail(name, "must be finite");
  }

  void Bool(const char* name, bool* out) {
    if (!Has(name)) return;
    const json& v = j_[name];
    if (!v.is_boolean()) {
      Fail(name, "must be true or false, got " + v.dump());
      return;
    }
    *out = v.get<bool>();
  }

  void String(const char* name, std::string* out) {
    if (!Has(name)) return;
    const json& v = j_[name];
    if (!v.is_string()) {
      Fail(name, "must be a string, got " + v.dump());
      return;
    }
    *out = v.get<std::string>();
  }

  void Fail(const std::string& field, const std::string& rule) {
    if (status_.ok()) status_ = InvalidArgument("{}: field '{}' {}", source_, field, rule);
  }
  const Status& status() const { return status_; }
  const json& j() const { return j_; }

 private:
  const json& j_;
  const std::string& source_;
  Status status_;
};

Status ParseRope(FieldReader& r, ModelConfig& c, const std::string& source) {
  const json& j = r.j();
  // rope as flat rope_theta/rope_scaling, or nested rope_parameters.
  const json* params = nullptr;
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    params = &j["rope_parameters"];
    if (!params->is_object()) {
      return InvalidArgument("{}: field 'rope_parameters' must be an object", source);
    }
  }
  const json* scaling = nullptr;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    scaling = &j["rope_scaling"];
    if (!scaling->is_object()) {
      return InvalidArgument("{}: field 'rope_scaling' must be an object or null", source);
    }
  }
  if (params != nullptr) {
    FieldReader p(*params, source);
    p.Float("rope_theta", &c.rope.rope_theta, true);
    if (!p.status().ok()) {
      return InvalidArgument(
          "{}: field 'rope_parameters.rope_theta' is required and must be a "
          "number",
          source);
    }
    scaling = params;
  } else {
    r.Float("rope_theta", &c.rope.rope_theta, false);
  }
  if (c.rope.rope_theta <= 0) {
    return InvalidArgument("{}: field 'rope_theta' must be > 0, got {}", source, c.rope.rope_theta);
  }
  if (scaling != nullptr) {
    FieldReader s(*scaling, source);
    std::string type = "default";
    s.String("rope_type", &type);
    if (!s.Has("rope_type")) s.String("type", &type);
    if (type != "default" && type != "yarn") {
      return Unimplemented("{}: rope type '{}' is not supported (supported: default, yarn)", source,
                           type);
    }
    c.rope.rope_type = type;
    if (type == "yarn") {
      s.Float("factor", &c.rope.factor, true);
      s.Int("original_max_position_embeddings", &c.rope.original_max_position_embeddings, true);
      s.Float("mscale", &c.rope.mscale, false);
      s.Float("mscale_all_dim", &c.rope.mscale_all_dim, false);
      s.Float("beta_fast", &c.rope.beta_fast, false);
      s.Float("beta_slow", &c.rope.beta_slow, false);
      if (!s.status().ok()) return s.status();
      if (c.rope.factor < 1.0) {
        return InvalidArgument("{}: field 'rope_scaling.factor' must be >= 1 for yarn", source);
      }
    }
  }
  return Status::Ok();
}

Status ParseLayerTypes(FieldReader& r, ModelConfig& c, const std::string& source) {
  const json& j = r.j();
  const int64_t L = c.num_hidden_layers;
  // mlp_layer_types, or the first_k_dense_replace / moe_layer_freq rule.
  std::vector<MlpType> rule(L);
  for (int64_t i = 0; i < L; ++i) {
    bool dense = i < c.first_k_dense_replace || (i % c.moe_layer_freq) != 0;
    rule[i] = dense ? MlpType::kDense : MlpType::kSparse;
  }
  if (r.Has("mlp_layer_types")) {
    const json& v = j["mlp_layer_types"];
    if (!v.is_array() || static_cast<int64_t>(v.size()) != L) {
      return InvalidArgument(
          "{}: field 'mlp_layer_types' must be a list of num_hidden_layers ({}) "
          "entries",
          source, L);
    }
    for (int64_t i = 0; i < L; ++i) {
      if (v[i] == "dense") {
        c.mlp_layer_types.push_back(MlpType::kDense);
      } else if (v[i] == "sparse" || v[i] == "moe") {
        c.mlp_layer_types.push_back(MlpType::kSparse);
      } else {
        return InvalidArgument(
            "{}: field 'mlp_layer_types[{}]' must be \"dense\" or \"sparse\", "
            "got {}",
            source, i, v[i].dump());
      }
    }
    if (r.Has("first_k_dense_replace") && c.mlp_layer_types != rule) {
      return InvalidArgument(
          "{}: field 'mlp_layer_types' disagrees with first_k_dense_replace={} "
          "and moe_layer_freq={} (rule: layer i is dense iff i < "
          "first_k_dense_replace or i % moe_layer_freq != 0)",
          source, c.first_k_dense_replace, c.moe_layer_freq);
    }
  } else {
    c.mlp_layer_types = rule;
  }

  if (!c.has_indexer) return Status::Ok();
  if (r.Has("indexer_types")) {
    const json& v = j["indexer_types"];
    if (!v.is_array() || static_cast<int64_t>(v.size()) != L) {
      return InvalidArgument(
          "{}: field 'indexer_types' must be a list of num_hidden_layers ({}) "
          "entries",
          source, L);
    }
    for (int64_t i = 0; i < L; ++i) {
      if (v[i] == "full") {
        c.indexer_types.push_back(IndexerType::kFull);
      } else if (v[i] == "shared") {
        c.indexer_types.push_back(IndexerType::kShared);
      } else {
        return InvalidArgument(
            "{}: field 'indexer_types[{}]' must be \"full\" or \"shared\", got "
            "{}",
            source, i, v[i].dump());
      }
    }
  } else {
    // HF rule: full iff max(i - offset + 1, 0) % freq == 0.
    for (int64_t i = 0; i < L; ++i) {
      int64_t k = std::max<int64_t>(i - c.index_skip_topk_offset + 1, 0);
      c.indexer_types.push_back(k % c.index_topk_freq == 0 ? IndexerType::kFull
                                                           : IndexerType::kShared);
    }
  }
  if (c.indexer_types[0] != IndexerType::kFull) {
    return InvalidArgument(
        "{}: field 'indexer_types' must make layer 0 \"full\" (a shared layer "
        "reuses the previous full layer's top-k)",
        source);
  }
  return Status::Ok();
}

Status Validate(const ModelConfig& c, const std::string& s) {
  auto bad = [&](const char* field, const std::string& rule) {
    return InvalidArgument("{}: field '{}' {}", s, field, rule);
  };
  if (c.num_key_value_heads != c.num_attention_heads) {
    return bad("num_key_value_heads",
               fmt::format("must equal num_attention_heads ({}) for MLA, got {}",
                           c.num_attention_heads, c.num_key_value_heads));
  }
  if (c.qk_rope_head_dim % 2 != 0) return bad("qk_rope_head_dim", "must be even (RoPE pairs)");
  if (c.num_experts_per_tok > c.n_routed_experts) {
    return bad("num_experts_per_tok", fmt::format("({}) must be <= n_routed_experts ({})",
                                                  c.num_experts_per_tok, c.n_routed_experts));
  }
  if (c.n_routed_experts % c.n_group != 0) {
    return bad("n_group", fmt::format("({}) must divide n_routed_experts ({})", c.n_group,
                                      c.n_routed_experts));
  }
  if (c.topk_group > c.n_group) {
    return bad("topk_group", fmt::format("({}) must be <= n_group ({})", c.topk_group, c.n_group));
  }
  const int64_t per_group = c.n_routed_experts / c.n_group;
  if (c.n_group > 1 && per_group < 2) {
    return bad("n_group", "leaves fewer than 2 experts per group (group score = sum of top-2)");
  }
  if (c.num_experts_per_tok > c.topk_group * per_group) {
    return bad("num_experts_per_tok",
               fmt::format("({}) exceeds the experts in the topk_group ({}) best groups ({})",
                           c.num_experts_per_tok, c.topk_group, c.topk_group * per_group));
  }
  if (c.first_k_dense_replace > c.num_hidden_layers) {
    return bad("first_k_dense_replace", "must be <= num_hidden_layers");
  }
  if (c.hidden_act != "silu") {
    return Unimplemented("{}: field 'hidden_act' = '{}' is not supported (supported: silu)", s,
                         c.hidden_act);
  }
  if (c.scoring_func != "sigmoid") {
    return Unimplemented("{}: field 'scoring_func' = '{}' is not supported (supported: sigmoid)", s,
                         c.scoring_func);
  }
  if (c.topk_method != "noaux_tc") {
    return Unimplemented("{}: field 'topk_method' = '{}' is not supported (supported: noaux_tc)", s,
                         c.topk_method);
  }
  if (c.attention_bias)
    return Unimplemented("{}: field 'attention_bias' = true is not supported", s);
  if (c.has_indexer) {
    if (c.index_head_dim <= c.qk_rope_head_dim) {
      return bad("index_head_dim", fmt::format("({}) must exceed qk_rope_head_dim ({}): the "
                                               "indexer head is [rope | nope]",
                                               c.index_head_dim, c.qk_rope_head_dim));
    }
  }
  if (c.num_nextn_predict_layers > 1) {
    return Unimplemented("{}: field 'num_nextn_predict_layers' = {} (supported: 0 or 1)", s,
                         c.num_nextn_predict_layers);
  }
  for (int64_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return bad("eos_token_id",
                 fmt::format("id {} is outside the vocabulary [0, {})", id, c.vocab_size));
    }
  }
  if (c.pad_token_id && (*c.pad_token_id < 0 || *c.pad_token_id >= c.vocab_size)) {
    return bad("pad_token_id", fmt::format("id {} is outside the vocabulary [0, {})",
                                           *c.pad_token_id, c.vocab_size));
  }
  return Status::Ok();
}

}  // namespace

const char* ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kGlmMoeDsa:
      return "GlmMoeDsaForCausalLM";
    case Architecture::kDeepseekV32:
      return "DeepseekV32ForCausalLM";
    case Architecture::kDeepseekV3:
      return "DeepseekV3ForCausalLM";
  }
  return "?";
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (rope.rope_type == "yarn" && rope.mscale_all_dim > 0 && rope.factor > 1.0) {
    double m = 0.1 * rope.mscale_all_dim * std::log(rope.factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (layer >= num_hidden_layers) return true;  // the MTP layer
  return mlp_layer_types[layer] == MlpType::kSparse;
}

bool ModelConfig::is_full_indexer_layer(int64_t layer) const {
  if (!has_indexer) return false;
  if (layer >= num_hidden_layers) return true;
  return indexer_types[layer] == IndexerType::kFull;
}

int64_t ModelConfig::num_full_indexer_layers() const {
  int64_t n = 0;
  for (auto t : indexer_types) n += t == IndexerType::kFull;
  return n;
}

Result<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("{}: not valid JSON", source);
  if (!j.is_object()) return InvalidArgument("{}: top level must be a JSON object", source);

  ModelConfig c;
  // Architecture
  if (!j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].empty() || !j["architectures"][0].is_string()) {
    return InvalidArgument(
        "{}: field 'architectures' must be a non-empty list of strings "
        "(supported: {})",
        source, kSupported);
  }
  const std::string arch = j["architectures"][0].get<std::string>();
  if (arch == "GlmMoeDsaForCausalLM") {
    c.architecture = Architecture::kGlmMoeDsa;
    c.has_indexer = true;
    c.indexer_rope_interleave = true;
  } else if (arch == "DeepseekV32ForCausalLM") {
    c.architecture = Architecture::kDeepseekV32;
    c.has_indexer = true;
    c.indexer_rope_interleave = false;  // NeoX-style indexer rope
  } else if (arch == "DeepseekV3ForCausalLM") {
    c.architecture = Architecture::kDeepseekV3;
    c.has_indexer = false;
  } else {
    return InvalidArgument("{}: architecture '{}' is not supported (supported: {})", source, arch,
                           kSupported);
  }

  FieldReader r(j, source);
  r.String("model_type", &c.model_type);
  r.Int("vocab_size", &c.vocab_size, true, 1, 1 << 24);
  r.Int("hidden_size", &c.hidden_size, true, 1, 1 << 20);
  r.Int("num_hidden_layers", &c.num_hidden_layers, true, 1, 4096);
  r.Int("max_position_embeddings", &c.max_position_embeddings, true);
  r.Float("rms_norm_eps", &c.rms_norm_eps, false);
  r.String("hidden_act", &c.hidden_act);
  r.Bool("attention_bias", &c.attention_bias);
  r.Bool("tie_word_embeddings", &c.tie_word_embeddings);
  if (r.Has("torch_dtype")) r.String("torch_dtype", &c.dtype);
  if (r.Has("dtype")) r.String("dtype", &c.dtype);

  r.Int("intermediate_size", &c.intermediate_size, true);
  r.Int("moe_intermediate_size", &c.moe_intermediate_size, true);
  r.Int("n_routed_experts", &c.n_routed_experts, true, 1, 65536);
  r.Int("n_shared_experts", &c.n_shared_experts, false, 0);
  r.Int("num_experts_per_tok", &c.num_experts_per_tok, true);
  r.Int("n_group", &c.n_group, false);
  r.Int("topk_group", &c.topk_group, false);
  r.Int("first_k_dense_replace", &c.first_k_dense_replace, false, 0);
  r.Int("moe_layer_freq", &c.moe_layer_freq, false);
  r.Float("routed_scaling_factor", &c.routed_scaling_factor, false);
  r.Bool("norm_topk_prob", &c.norm_topk_prob);
  r.String("scoring_func", &c.scoring_func);
  r.String("topk_method", &c.topk_method);
  r.String("moe_router_dtype", &c.moe_router_dtype);

  r.Int("num_attention_heads", &c.num_attention_heads, true, 1, 4096);
  c.num_key_value_heads = c.num_attention_heads;
  r.Int("num_key_value_heads", &c.num_key_value_heads, false);
  r.Int("q_lora_rank", &c.q_lora_rank, true);
  r.Int("kv_lora_rank", &c.kv_lora_rank, true);
  r.Int("qk_nope_head_dim", &c.qk_nope_head_dim, true);
  r.Int("qk_rope_head_dim", &c.qk_rope_head_dim, true);
  r.Int("v_head_dim", &c.v_head_dim, true);
  r.Bool("rope_interleave", &c.rope_interleave);

  if (c.has_indexer) {
    r.Int("index_topk", &c.index_topk, true);
    r.Int("index_n_heads", &c.index_n_heads, true);
    r.Int("index_head_dim", &c.index_head_dim, true);
    r.Int("index_topk_freq", &c.index_topk_freq, false);
    r.Int("index_skip_topk_offset", &c.index_skip_topk_offset, false, 0);
    r.Bool("index_share_for_mtp_iteration", &c.index_share_for_mtp_iteration);
    r.Bool("indexer_rope_interleave", &c.indexer_rope_interleave);
  }
  r.Int("num_nextn_predict_layers", &c.num_nextn_predict_layers, false, 0, 16);

  // eos_token_id: int or list of ints
  if (r.Has("eos_token_id")) {
    const json& v = j["eos_token_id"];
    if (v.is_number_integer()) {
      c.eos_token_ids.push_back(v.get<int64_t>());
    } else if (v.is_array()) {
      for (const auto& e : v) {
        if (!e.is_number_integer()) {
          r.Fail("eos_token_id", "must be an integer or a list of integers");
          break;
        }
        c.eos_token_ids.push_back(e.get<int64_t>());
      }
    } else {
      r.Fail("eos_token_id", "must be an integer or a list of integers");
    }
  }
  if (r.Has("pad_token_id")) {
    int64_t v = 0;
    r.Int("pad_token_id", &v, false, 0);
    c.pad_token_id = v;
  }
  if (r.Has("bos_token_id")) {
    int64_t v = 0;
    r.Int("bos_token_id", &v, false, 0);
    c.bos_token_id = v;
  }
  if (!r.status().ok()) return r.status();

  MX_RETURN_IF_ERROR(ParseRope(r, c, source));
  MX_RETURN_IF_ERROR(ParseLayerTypes(r, c, source));
  if (j.contains("quantization_config") && !j["quantization_config"].is_null()) {
    if (!j["quantization_config"].is_object()) {
      return InvalidArgument("{}: field 'quantization_config' must be an object", source);
    }
    c.quantization_config_json = j["quantization_config"].dump();
  }
  MX_RETURN_IF_ERROR(Validate(c, source));
  return c;
}

Result<ModelConfig> LoadModelConfig(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot open config", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseModelConfig(ss.str(), path);
}

}  // namespace mx
