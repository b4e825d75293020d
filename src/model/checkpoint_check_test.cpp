// The checkpoint check reports every missing, unexpected and mis-shaped tensor at once and
// decides MXFP4 / bf16 per tensor from the file itself.
#include "model/checkpoint_check.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/safetensors_writer.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

ModelConfig TinyConfig() {
  auto c = LoadModelConfig(kTiny + "/config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

bool Contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(CheckpointCheck, CommittedTinyIsComplete) {
  ModelConfig c = TinyConfig();
  auto specs = ExpectedTensors(c);
  auto ck = Checkpoint::Open(kTiny);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  CheckpointReport r = CheckCheckpoint(c, specs, *ck);
  EXPECT_TRUE(r.ok()) << r.ProblemSummary();
  EXPECT_EQ(r.matches.size(), specs.size());
  for (const auto& m : r.matches) {
    if (m.spec->name.find("e_score_correction_bias") != std::string::npos) {
      EXPECT_EQ(m.format, WeightFormat::kF32);
    } else {
      EXPECT_EQ(m.format, WeightFormat::kBF16) << m.spec->name;
    }
  }
}

TEST(CheckpointCheck, EveryProblemListedAtOnce) {
  ModelConfig c = TinyConfig();
  auto specs = ExpectedTensors(c);
  auto src = Checkpoint::Open(kTiny);
  ASSERT_TRUE(src.ok());
  SafetensorsWriter w;
  const std::string dropped1 = "model.layers.1.self_attn.kv_b_proj.weight";
  const std::string dropped2 = "lm_head.weight";
  const std::string reshaped = "model.layers.2.self_attn.o_proj.weight";
  const std::string packed = "model.layers.3.mlp.experts.5.up_proj.weight";  // [32, 64]
  const std::string bad_pack = "model.layers.3.mlp.experts.6.up_proj.weight";
  for (const TensorView* t : src->tensors()) {
    if (t->name == dropped1 || t->name == dropped2) continue;
    std::span<const uint8_t> bytes(t->data, t->nbytes);
    if (t->name == reshaped) {
      ASSERT_TRUE(w.Add(t->name, t->dtype, {t->shape[1], t->shape[0]}, bytes).ok());
    } else if (t->name == packed || t->name == bad_pack) {
      std::vector<uint8_t> q(t->shape[0] * t->shape[1] / 2, 0x21);
      ASSERT_TRUE(w.AddOwned(t->name, DType::kU8, {t->shape[0], t->shape[1] / 2}, q).ok());
      std::vector<uint8_t> s(t->shape[0] * t->shape[1] / 32, 127);
      std::string scale = t->name.substr(0, t->name.size() - 6) + "weight_scale";
      if (t->name == packed) {
        ASSERT_TRUE(w.AddOwned(scale, DType::kU8, {t->shape[0], t->shape[1] / 32}, s).ok());
      } else {
        std::vector<uint8_t> wrong(t->shape[0], 127);  // [out, 1]: wrong scale shape
        ASSERT_TRUE(w.AddOwned(scale, DType::kU8, {t->shape[0], 1}, wrong).ok());
      }
    } else {
      ASSERT_TRUE(w.Add(t->name, t->dtype, t->shape, bytes).ok());
    }
  }
  std::vector<uint8_t> junk(16 * 2, 0);
  ASSERT_TRUE(
      w.AddOwned("model.layers.1.self_attn.rotary_emb.inv_freq", DType::kBF16, {16}, junk).ok());
  // indexer weights on the IndexShare "shared" layer 2: ignored, not an error
  std::vector<uint8_t> ix(16 * 2, 0);
  ASSERT_TRUE(
      w.AddOwned("model.layers.2.self_attn.indexer.k_norm.weight", DType::kBF16, {16}, ix).ok());
  // A layer number beyond int64 is an unexpected tensor, not an exception.
  const std::string huge = "model.layers.99999999999999999999999.self_attn.";
  ASSERT_TRUE(w.AddOwned(huge + "indexer.k_norm.weight", DType::kBF16, {16}, ix).ok());
  ASSERT_TRUE(w.AddOwned(huge + "k_scale", DType::kF32, {1}, std::vector<uint8_t>(4, 0)).ok());
  const fs::path dir = fs::path(::testing::TempDir()) / "mx_ckpt_check";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_TRUE(w.Write(dir.string()).ok());
  auto ck = Checkpoint::Open(dir.string());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  CheckpointReport r = CheckCheckpoint(c, specs, *ck);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing.size(), 2u);
  EXPECT_TRUE(Contains(r.missing, dropped1));
  EXPECT_TRUE(Contains(r.missing, dropped2));
  ASSERT_EQ(r.mismatched.size(), 2u) << r.ProblemSummary();
  EXPECT_TRUE(Contains(r.mismatched, reshaped + ": expected BF16 [64, 80], found BF16 [80, 64]"))
      << r.ProblemSummary();
  EXPECT_TRUE(Contains(r.mismatched, bad_pack));
  EXPECT_EQ(r.unexpected.size(), 4u) << r.ProblemSummary();  // inv_freq, bad scale, 2 huge
  EXPECT_TRUE(Contains(r.unexpected, "rotary_emb.inv_freq"));
  EXPECT_TRUE(Contains(r.unexpected, huge + "indexer.k_norm.weight"));
  EXPECT_TRUE(Contains(r.unexpected, huge + "k_scale"));
  EXPECT_EQ(r.ignored, std::vector<std::string>{"model.layers.2.self_attn.indexer.k_norm.weight"});
  for (const auto& m : r.matches) {
    if (m.spec->name == packed) {
      EXPECT_EQ(m.format, WeightFormat::kMXFP4);
    }
  }
  const std::string summary = r.ProblemSummary();
  EXPECT_NE(summary.find("2 missing"), std::string::npos) << summary;
  EXPECT_NE(summary.find("2 mis-shaped"), std::string::npos) << summary;
  EXPECT_NE(summary.find("4 unexpected"), std::string::npos) << summary;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mx
