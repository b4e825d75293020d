// ModelConfig parsing: the real GLM-5.x configs, the rope/indexer rules, and one test per
// validation rule with a malformed config (the error must name the field).
#include "io/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mx {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json Glm52() { return json::parse(ReadFile(std::string(MX_SHARED_DIR) + "/configs/glm-5.2.json")); }

TEST(ModelConfig, Glm52) {
  auto c = LoadModelConfig(std::string(MX_SHARED_DIR) + "/configs/glm-5.2.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kGlmMoeDsa);
  EXPECT_EQ(c->hidden_size, 6144);
  EXPECT_EQ(c->num_hidden_layers, 78);
  EXPECT_EQ(c->num_full_indexer_layers(), 21);
  EXPECT_TRUE(c->is_full_indexer_layer(0));
  EXPECT_TRUE(c->is_full_indexer_layer(6));
  EXPECT_FALSE(c->is_full_indexer_layer(3));
  EXPECT_TRUE(c->is_full_indexer_layer(78)) << "the MTP layer has its own indexer";
  EXPECT_EQ(c->rope.rope_theta, 8e6);
  EXPECT_DOUBLE_EQ(c->softmax_scale(), 0.0625);
  EXPECT_FALSE(c->is_moe_layer(2));
  EXPECT_TRUE(c->is_moe_layer(3));
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{154820, 154827, 154829}));
  EXPECT_EQ(c->qk_head_dim(), 256);
  EXPECT_EQ(c->mla_cache_values(), 576);
}

TEST(ModelConfig, FreqOffsetRuleEqualsExplicitList) {
  json j = Glm52();
  auto explicit_cfg = ParseModelConfig(j.dump(), "glm52");
  j.erase("indexer_types");
  auto rule_cfg = ParseModelConfig(j.dump(), "glm52-rule");
  ASSERT_TRUE(explicit_cfg.ok());
  ASSERT_TRUE(rule_cfg.ok()) << rule_cfg.status().ToString();
  EXPECT_EQ(explicit_cfg->indexer_types, rule_cfg->indexer_types);
}

TEST(ModelConfig, Glm51AllFullAndFlatRope) {
  auto c = LoadModelConfig(std::string(MX_SHARED_DIR) + "/configs/glm-5.1.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_full_indexer_layers(), 78);
  EXPECT_EQ(c->rope.rope_theta, 1e6);
  json j = json::parse(ReadFile(std::string(MX_SHARED_DIR) + "/configs/glm-5.1.json"));
  j.erase("rope_parameters");
  j["rope_theta"] = 123456.0;
  auto flat = ParseModelConfig(j.dump(), "flat");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->rope.rope_theta, 123456.0);
}

TEST(ModelConfig, DeepseekV32AndV3) {
  json j = Glm52();
  j["architectures"] = {"DeepseekV32ForCausalLM"};
  j.erase("indexer_types");
  j.erase("index_topk_freq");
  j.erase("index_skip_topk_offset");
  j.erase("indexer_rope_interleave");
  j["n_group"] = 8;
  j["topk_group"] = 4;
  j.erase("rope_parameters");
  j["rope_theta"] = 10000;
  j["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 40},          {"original_max_position_embeddings", 4096},
      {"mscale", 1.0},  {"mscale_all_dim", 1.0}, {"beta_fast", 32},
      {"beta_slow", 1}};
  auto v32 = ParseModelConfig(j.dump(), "v32");
  ASSERT_TRUE(v32.ok()) << v32.status().ToString();
  EXPECT_FALSE(v32->indexer_rope_interleave) << "DeepSeek-V3.2 indexer rope is NeoX";
  EXPECT_EQ(v32->num_full_indexer_layers(), 78);
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(v32->softmax_scale(), m * m / 16.0, 1e-12);
  j["architectures"] = {"DeepseekV3ForCausalLM"};
  auto v3 = ParseModelConfig(j.dump(), "v3");
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  EXPECT_FALSE(v3->has_indexer);
  EXPECT_FALSE(v3->is_full_indexer_layer(0));
}

TEST(ModelConfig, QuantizationConfigKeptRaw) {
  json j = Glm52();
  j["quantization_config"] = {{"quant_method", "quark"}, {"exclude", {"lm_head"}}};
  auto c = ParseModelConfig(j.dump(), "q");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->quantization_config_json.has_value());
  EXPECT_EQ(json::parse(*c->quantization_config_json)["quant_method"], "quark");
}

struct BadCase {
  const char* what;
  std::function<void(json&)> mutate;
  const char* must_mention;
};

TEST(ModelConfig, MalformedConfigsNameTheField) {
  std::vector<BadCase> cases = {
      {"unknown arch", [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; },
       "DeepseekV3ForCausalLM"},
      {"no arch", [](json& j) { j.erase("architectures"); }, "architectures"},
      {"missing hidden", [](json& j) { j.erase("hidden_size"); }, "hidden_size"},
      {"string hidden", [](json& j) { j["hidden_size"] = "6144"; }, "hidden_size"},
      {"fractional", [](json& j) { j["num_hidden_layers"] = 7.5; }, "num_hidden_layers"},
      {"zero vocab", [](json& j) { j["vocab_size"] = 0; }, "vocab_size"},
      {"topk > experts", [](json& j) { j["num_experts_per_tok"] = 300; }, "num_experts_per_tok"},
      {"group not dividing", [](json& j) { j["n_group"] = 3; }, "n_group"},
      {"topk_group > n_group", [](json& j) { j["topk_group"] = 2; }, "topk_group"},
      {"kv heads", [](json& j) { j["num_key_value_heads"] = 8; }, "num_key_value_heads"},
      {"odd rope", [](json& j) { j["qk_rope_head_dim"] = 63; }, "qk_rope_head_dim"},
      {"indexer list length", [](json& j) { j["indexer_types"].erase(0); }, "indexer_types"},
      {"indexer value", [](json& j) { j["indexer_types"][5] = "half"; }, "indexer_types[5]"},
      {"layer 0 shared", [](json& j) { j["indexer_types"][0] = "shared"; }, "layer 0"},
      {"mlp types disagree",
       [](json& j) {
         std::vector<std::string> t(78, "sparse");
         j["mlp_layer_types"] = t;
       },
       "first_k_dense_replace"},
      {"rope type", [](json& j) { j["rope_parameters"]["rope_type"] = "longrope"; }, "longrope"},
      {"no theta", [](json& j) { j["rope_parameters"].erase("rope_theta"); }, "rope_theta"},
      {"act", [](json& j) { j["hidden_act"] = "gelu"; }, "hidden_act"},
      {"scoring", [](json& j) { j["scoring_func"] = "softmax"; }, "scoring_func"},
      {"eos range",
       [](json& j) {
         j["eos_token_id"] = {1, 999999};
       },
       "eos_token_id"},
      {"eos type", [](json& j) { j["eos_token_id"] = "x"; }, "eos_token_id"},
      {"bool type", [](json& j) { j["norm_topk_prob"] = 1; }, "norm_topk_prob"},
      {"index head", [](json& j) { j["index_head_dim"] = 64; }, "index_head_dim"},
      {"mtp layers", [](json& j) { j["num_nextn_predict_layers"] = 3; },
       "num_nextn_predict_layers"},
      {"quant cfg", [](json& j) { j["quantization_config"] = "quark"; }, "quantization_config"},
  };
  for (const auto& bc : cases) {
    json j = Glm52();
    bc.mutate(j);
    auto c = ParseModelConfig(j.dump(), "cfg.json");
    ASSERT_FALSE(c.ok()) << bc.what;
    EXPECT_NE(c.status().message().find(bc.must_mention), std::string::npos)
        << bc.what << ": " << c.status().message();
    EXPECT_NE(c.status().message().find("cfg.json"), std::string::npos) << bc.what;
  }
}

TEST(ModelConfig, NotJsonOrNotObject) {
  EXPECT_FALSE(ParseModelConfig("{", "x").ok());
  EXPECT_FALSE(ParseModelConfig("[]", "x").ok());
  EXPECT_FALSE(ParseModelConfig("", "x").ok());
  EXPECT_EQ(LoadModelConfig("/nonexistent/config.json").status().code(), StatusCode::kNotFound);
}

// Fuzz-style: random mutations of the real config (type swaps, deletions, truncations) must
// give a Status or a config, never a crash (this test also runs under ASan).
TEST(ModelConfig, RandomMutationsNeverCrash) {
  const std::string base = Glm52().dump();
  json j0 = Glm52();
  std::vector<std::string> keys;
  for (auto it = j0.begin(); it != j0.end(); ++it) keys.push_back(it.key());
  std::mt19937 rng(42);
  const json replacements[] = {
      nullptr, -1, 0, 1, 1e300, "x", json::array(), json::object(), true, 3.5, json::array({1, 2}),
      1 << 30};
  int ok = 0, bad = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    if (i % 3 == 0) {
      text = base.substr(0, rng() % base.size());
      if (i % 2 && !text.empty()) text[rng() % text.size()] = static_cast<char>(rng());
    } else {
      json j = j0;
      int n = 1 + rng() % 3;
      for (int k = 0; k < n; ++k) {
        const auto& key = keys[rng() % keys.size()];
        if (rng() % 4 == 0)
          j.erase(key);
        else
          j[key] = replacements[rng() % std::size(replacements)];
      }
      text = j.dump();
    }
    auto c = ParseModelConfig(text, "fuzz");
    if (c.ok())
      ++ok;
    else
      ++bad;
  }
  EXPECT_GT(bad, 1000);
}

}  // namespace
}  // namespace mx
