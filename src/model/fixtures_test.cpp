// Loads every golden fixture of the committed test checkpoints (tests/data/*/fixtures) and
// validates each tensor's dtype and shape against the checkpoint's config, and the values'
// basic invariants (finite floats, ids in range, top-k sets causal, sorted and unique).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/safetensors.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

std::vector<float> F32(const TensorView& t) {
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}
std::vector<int32_t> I32(const TensorView& t) {
  std::vector<int32_t> v(t.numel());
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

void ExpectTensor(const SafetensorsFile& f, const std::string& name, DType dtype,
                  std::vector<int64_t> shape) {
  const TensorView* t = f.Find(name);
  ASSERT_NE(t, nullptr) << f.path() << ": missing " << name;
  EXPECT_EQ(t->dtype, dtype) << f.path() << ": " << name;
  EXPECT_EQ(t->shape, shape) << f.path() << ": " << name;
  if (dtype == DType::kF32 && t->shape == shape) {
    for (float x : F32(*t)) ASSERT_TRUE(std::isfinite(x)) << f.path() << ": " << name;
  }
}

void CheckTopk(const std::vector<int32_t>& sets, int64_t T, int64_t K, const std::string& what) {
  for (int64_t p = 0; p < T; ++p) {
    const int64_t want = std::min<int64_t>(K, p + 1);
    int64_t n = 0;
    int32_t prev = -1;
    for (int64_t k = 0; k < K; ++k) {
      int32_t v = sets[p * K + k];
      if (v < 0) {
        EXPECT_EQ(v, -1) << what;
        continue;
      }
      ++n;
      EXPECT_LE(v, p) << what << " row " << p << ": top-k must be causal";
      EXPECT_GT(v, prev) << what << " row " << p << ": sorted ascending, unique";
      prev = v;
    }
    EXPECT_EQ(n, want) << what << " row " << p;
  }
}

void CheckCheckpointFixtures(const std::string& name) {
  const fs::path dir = fs::path(MX_TEST_DATA_DIR) / name;
  auto cfg = LoadModelConfig((dir / "config.json").string());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  const ModelConfig& c = *cfg;
  const int64_t L = c.num_hidden_layers, V = c.vocab_size, D = c.hidden_size, K = c.index_topk,
                k = c.num_experts_per_tok;
  int files = 0;
  for (int64_t T : {3, 17, 40, 130}) {
    const fs::path p = dir / "fixtures" / ("prompt_" + std::to_string(T) + ".safetensors");
    auto f = SafetensorsFile::Open(p.string());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ++files;
    const SafetensorsFile& sf = **f;
    ExpectTensor(sf, "prompt_ids", DType::kI32, {T});
    ExpectTensor(sf, "logits", DType::kF32, {T, V});
    ExpectTensor(sf, "hidden_states", DType::kF32, {L + 1, T, D});
    ExpectTensor(sf, "final_hidden", DType::kF32, {T, D});
    ExpectTensor(sf, "indexer_topk", DType::kI32, {L, T, K});
    ExpectTensor(sf, "mtp_next_ids", DType::kI32, {T});
    ExpectTensor(sf, "mtp_logits", DType::kF32, {T, V});
    ExpectTensor(sf, "mtp_hidden", DType::kF32, {T, D});
    ExpectTensor(sf, "mtp_indexer_topk", DType::kI32, {T, K});
    ExpectTensor(sf, "mtp_router_experts", DType::kI32, {T, k});
    ExpectTensor(sf, "mtp_router_weights", DType::kF32, {T, k});
    ExpectTensor(sf, "greedy_ids", DType::kI32, {32});
    for (int64_t l = 0; l < L; ++l) {
      if (c.is_moe_layer(l)) {
        ExpectTensor(sf, "router_experts." + std::to_string(l), DType::kI32, {T, k});
        ExpectTensor(sf, "router_weights." + std::to_string(l), DType::kF32, {T, k});
        const auto experts = I32(*sf.Find("router_experts." + std::to_string(l)));
        for (int32_t e : experts) {
          EXPECT_GE(e, 0);
          EXPECT_LT(e, c.n_routed_experts);
        }
      } else {
        EXPECT_EQ(sf.Find("router_experts." + std::to_string(l)), nullptr) << "dense layer " << l;
      }
    }
    for (int32_t id : I32(*sf.Find("prompt_ids"))) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, V);
    }
    for (int32_t id : I32(*sf.Find("greedy_ids"))) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, V);
    }
    const auto topk = I32(*sf.Find("indexer_topk"));
    for (int64_t l = 0; l < L; ++l) {
      std::vector<int32_t> layer(topk.begin() + l * T * K, topk.begin() + (l + 1) * T * K);
      CheckTopk(layer, T, K, p.string() + " layer " + std::to_string(l));
      // IndexShare: a shared layer holds the previous full layer's set.
      if (!c.is_full_indexer_layer(l)) {
        std::vector<int32_t> prev(topk.begin() + (l - 1) * T * K, topk.begin() + l * T * K);
        EXPECT_EQ(layer, prev) << "shared layer " << l << " reuses the previous set";
      }
    }
    CheckTopk(I32(*sf.Find("mtp_indexer_topk")), T, K, p.string() + " mtp");
  }
  EXPECT_EQ(files, 4);
  // greedy.json mirrors the 32-token continuations
  std::ifstream gj((dir / "fixtures" / "greedy.json").string());
  ASSERT_TRUE(gj.good());
  auto j = nlohmann::json::parse(gj, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
}

TEST(Fixtures, Tiny) { CheckCheckpointFixtures("tiny"); }
TEST(Fixtures, TinyGlm52) { CheckCheckpointFixtures("tiny-glm52"); }

}  // namespace
}  // namespace mx
