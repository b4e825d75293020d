// Exclude-list semantics (../shared/reference/mxfp4-and-fp8.md §4) and the Quark config reader.
#include "quant/exclude.h"

#include <gtest/gtest.h>

#include "quant/quark_config.h"

namespace mx::quant {
namespace {

ExcludeList L(std::vector<std::string> e) {
  auto r = ExcludeList::Parse(e);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(Exclude, ExactGlobRegex) {
  EXPECT_TRUE(L({"lm_head"}).Matches("lm_head", -1));
  EXPECT_FALSE(L({"lm_head"}).Matches("model.lm_head2", -1));
  EXPECT_TRUE(L({"model.layers.*.self_attn.indexer.weights_proj"})
                  .Matches("model.layers.12.self_attn.indexer.weights_proj", -1));
  // re: is re.match: anchored at the start only.
  EXPECT_TRUE(L({"re:.*v_proj"}).Matches("model.layers.0.self_attn.qkv_proj", -1));
  EXPECT_FALSE(L({"re:v_proj"}).Matches("model.layers.0.self_attn.v_proj", -1));
  // The experts-only recipe: everything except routed experts is excluded.
  const ExcludeList experts_only = L({"re:^(?!.*\\.mlp\\.experts(?:\\.|$)).*$"});
  EXPECT_TRUE(experts_only.Matches("model.layers.3.self_attn.q_a_proj", -1));
  EXPECT_FALSE(experts_only.Matches("model.layers.3.mlp.experts.7.up_proj", -1));
  EXPECT_FALSE(ExcludeList::Parse({"re:(unclosed"}).ok());
}

TEST(Exclude, ExactEntryCoversChildrenAndFusedNames) {
  EXPECT_TRUE(
      L({"model.layers.3.mlp.experts"}).Matches("model.layers.3.mlp.experts.0.gate_proj", -1));
  EXPECT_FALSE(
      L({"model.layers.3.mlp.experts"}).Matches("model.layers.30.mlp.experts.0.gate_proj", -1));
  EXPECT_TRUE(L({"model.layers.3.mlp.experts.5.gate_up_proj"})
                  .Matches("model.layers.3.mlp.experts.5.up_proj", -1));
  EXPECT_FALSE(L({"model.layers.3.mlp.experts.5.gate_up_proj"})
                   .Matches("model.layers.3.mlp.experts.5.down_proj", -1));
  EXPECT_TRUE(L({"visual.blocks.0.attn.qkv_proj"}).Matches("visual.blocks.0.attn.k_proj", -1));
  EXPECT_TRUE(L({"lm_head.weight"}).Matches("lm_head", -1));
  // The reverse prefix (ROCm/ATOM #646) must not match: a child entry never covers its parent.
  EXPECT_FALSE(L({"model.layers.0.mlp.gate"}).Matches("model.layers.0.mlp", -1));
}

TEST(Exclude, MtpAliases) {
  const int64_t L78 = 78;
  for (const char* e :
       {"model.layers.78.mlp.shared_experts.down_proj",
        "model.decoder.mlp.shared_experts.down_proj", "model.decoder.mlp.shared_experts",
        "model.decoder.mlp.shared_experts.*", "model.layers.78.mlp.shared_experts.*"}) {
    EXPECT_TRUE(L({e}).Matches("model.layers.78.mlp.shared_experts.down_proj", L78)) << e;
  }
  EXPECT_TRUE(L({"model.eh_proj"}).Matches("model.layers.78.eh_proj", L78));
  EXPECT_TRUE(L({"model.shared_head.head"}).Matches("model.layers.78.shared_head.head", L78));
  EXPECT_FALSE(L({"model.decoder.eh_proj"}).Matches("model.layers.78.eh_proj", L78));
  // Only the MTP layer has aliases.
  EXPECT_FALSE(L({"model.decoder.mlp.shared_experts"})
                   .Matches("model.layers.77.mlp.shared_experts.down_proj", L78));
  EXPECT_FALSE(L({"model.decoder.mlp.shared_experts"})
                   .Matches("model.layers.78.mlp.shared_experts.down_proj", -1));
}

TEST(QuarkConfig, RoundTrip) {
  const auto j = MakeQuarkConfig(ScaleMode::kFloor, {"lm_head", "model.layers.0.self_attn.o_proj"});
  EXPECT_EQ(j["quant_method"], "quark");
  EXPECT_EQ(j["global_quant_config"]["weight"]["dtype"], "fp4");
  EXPECT_EQ(j["global_quant_config"]["weight"]["group_size"], 32);
  EXPECT_EQ(j["global_quant_config"]["weight"]["scale_format"], "e8m0");
  EXPECT_EQ(j["global_quant_config"]["weight"]["round_method"], "half_even");
  EXPECT_EQ(j["global_quant_config"]["weight"]["scale_calculation_mode"], "floor");
  EXPECT_EQ(j["export"]["weight_format"], "real_quantized");
  auto info = ParseQuantConfig(j.dump());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->weight_mxfp4);
  EXPECT_EQ(info->scale_mode, ScaleMode::kFloor);
  EXPECT_EQ(info->exclude.size(), 2u);
  EXPECT_FALSE(ParseQuantConfig(R"({"quant_method":"quark","exclude":[1]})").ok());
  EXPECT_FALSE(ParseQuantConfig("[").ok());
  auto fp8 = ParseQuantConfig(R"({"quant_method":"fp8"})");
  ASSERT_TRUE(fp8.ok());
  EXPECT_FALSE(fp8->weight_mxfp4);
}

}  // namespace
}  // namespace mx::quant
