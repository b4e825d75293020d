// Expected tensor list and counts against the published GLM-5.2 figures
// (../shared/configs/README.md and glm-moe-dsa.md §1.3).
#include "model/tensor_plan.h"

#include <gtest/gtest.h>

#include <set>

namespace mx {
namespace {

ModelConfig Load(const char* name) {
  auto c = LoadModelConfig(std::string(MX_SHARED_DIR) + "/configs/" + name);
  if (!c.ok()) {
    ADD_FAILURE() << c.status().ToString();
    return ModelConfig{};
  }
  return *c;
}

int64_t Param(const ParamSummary& s, TensorCategory c) { return s.params[static_cast<int>(c)]; }

TEST(TensorPlan, LayerOfTensor) {
  EXPECT_EQ(LayerOfTensor("model.layers.0.mlp.gate.weight"), 0);
  EXPECT_EQ(LayerOfTensor("model.layers.78.self_attn.indexer.wk.weight"), 78);
  EXPECT_EQ(LayerOfTensor("model.embed_tokens.weight"), -1);
  EXPECT_EQ(LayerOfTensor("model.layers.x.mlp"), -1);
  EXPECT_EQ(LayerOfTensor("model.layers.12"), -1);  // no '.' after the number
  EXPECT_EQ(LayerOfTensor("model.layers.-3.mlp"), -1);
  EXPECT_EQ(LayerOfTensor("model.layers.99999999999999999999999.mlp"), -1);  // past int64
  EXPECT_EQ(LayerOfTensor("lm_head.weight"), -1);
}

TEST(TensorPlan, Glm52Figures) {
  ModelConfig c = Load("glm-5.2.json");
  ASSERT_GT(c.num_hidden_layers, 0);
  auto specs = ExpectedTensors(c);
  ParamSummary s = Summarize(c, specs);
  EXPECT_EQ(s.main_tensors, 58794);
  EXPECT_EQ(s.mtp_tensors, 791);
  EXPECT_EQ(s.main_params, 743377019904);
  EXPECT_EQ(s.mtp_params, 9952920576);
  EXPECT_EQ(s.total_params, 743377019904 + 9952920576);
  EXPECT_EQ(Param(s, TensorCategory::kEmbed), 951582720);
  EXPECT_EQ(Param(s, TensorCategory::kHead), 951582720);
  EXPECT_EQ(Param(s, TensorCategory::kAttention), 12871732224);
  EXPECT_EQ(Param(s, TensorCategory::kIndexer), 196809984);
  EXPECT_EQ(Param(s, TensorCategory::kDenseMlp), 679477248);
  EXPECT_EQ(Param(s, TensorCategory::kRoutedExperts), 724775731200);
  EXPECT_EQ(Param(s, TensorCategory::kSharedExpertsRouter), 2949139200);
  EXPECT_EQ(Param(s, TensorCategory::kNorms), 964608);
  EXPECT_NEAR(s.active_params / 1e9, 41.25, 0.01);
  KvCacheSize kv = KvCacheBytes(c);
  EXPECT_EQ(kv.bf16_bytes_per_token, 95232);
  EXPECT_EQ(kv.full_indexer_layers, 21);
  EXPECT_EQ(kv.mla_values_per_layer, 576);
}

TEST(TensorPlan, Glm51FullIndexers) {
  ModelConfig c = Load("glm-5.1.json");
  ASSERT_GT(c.num_hidden_layers, 0);
  ParamSummary s = Summarize(c, ExpectedTensors(c));
  EXPECT_EQ(s.main_params, 743911218432);
  EXPECT_EQ(KvCacheBytes(c).bf16_bytes_per_token, 109824);
}

TEST(TensorPlan, NamesUniqueAndMtpLayout) {
  ModelConfig c = Load("glm-5.2.json");
  ASSERT_GT(c.num_hidden_layers, 0);
  auto specs = ExpectedTensors(c);
  std::set<std::string> names;
  for (const auto& t : specs) EXPECT_TRUE(names.insert(t.name).second) << t.name;
  EXPECT_TRUE(names.count("model.layers.78.eh_proj.weight"));
  EXPECT_TRUE(names.count("model.layers.78.self_attn.indexer.wk.weight"));
  EXPECT_FALSE(names.count("model.layers.78.embed_tokens.weight"));
  EXPECT_FALSE(names.count("model.layers.78.shared_head.head.weight"));
  EXPECT_FALSE(names.count("model.layers.3.self_attn.indexer.wk.weight")) << "shared layer";
  EXPECT_TRUE(names.count("model.layers.6.self_attn.indexer.k_norm.bias"));
  for (const auto& t : specs) {
    if (t.name == "model.layers.78.eh_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{6144, 12288}));
    }
    if (t.name == "model.layers.5.mlp.gate.e_score_correction_bias") {
      EXPECT_EQ(t.dtype, DType::kF32);
    }
  }
}

TEST(TensorPlan, BenchScaleFigures) {
  ModelConfig c = Load("bench-scale.json");
  ASSERT_GT(c.num_hidden_layers, 0);
  ParamSummary s = Summarize(c, ExpectedTensors(c));
  EXPECT_NEAR(s.total_params / 1e9, 1.46, 0.005);
  EXPECT_NEAR(s.main_params / 1e9, 1.29, 0.005);
}

}  // namespace
}  // namespace mx
