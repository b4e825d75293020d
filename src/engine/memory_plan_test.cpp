// The memory plan's arithmetic against independent computations: KV bytes per token from the
// config's fields and the KV store's own formula, the budget from --max-total-tokens or the
// automatic fraction, the ranks and replicas, the totals; the fit check's advice (the budget it
// suggests does fit), and clear errors for bad inputs.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/model_config.h"
#include "kv/paged_kv_store.h"

namespace mx {
namespace {

std::string TestCheckpointDir(const std::string& name) {
  return std::string(MX_TEST_DATA_DIR) + "/" + name;
}

MemoryPlanOptions Options(const std::string& name) {
  MemoryPlanOptions o;
  o.model_dir = TestCheckpointDir(name);
  o.model_name = name;
  o.threads = 2;
  o.available_bytes = int64_t{16} << 30;
  return o;
}

ModelConfig Config(const std::string& name) {
  auto c = LoadModelConfig(TestCheckpointDir(name) + "/config.json");
  EXPECT_TRUE(c.ok());
  return std::move(c).value();
}

TEST(MemoryPlan, KvBytesPerTokenFollowTheConfig) {
  for (const char* name : {"tiny", "tiny-glm52"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = Config(name);
    for (const char* dtype : {"bf16", "fp8_e4m3", "f32"}) {
      MemoryPlanOptions o = Options(name);
      o.kv_cache_dtype = dtype;
      auto p = PlanMemory(o);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      const int64_t elem = std::string(dtype) == "bf16" ? 2 : std::string(dtype) == "f32" ? 4 : 1;
      // Every layer, the MTP layer included: latent + rope, and the indexer key on full layers.
      const int64_t layers = c.num_hidden_layers + c.num_nextn_predict_layers;
      ASSERT_EQ(static_cast<int64_t>(p->kv.layers.size()), layers);
      int64_t full = 0, sum = 0;
      for (const KvLayerPlan& l : p->kv.layers) {
        EXPECT_EQ(l.latent_values, c.kv_lora_rank);
        EXPECT_EQ(l.rope_values, c.qk_rope_head_dim);
        EXPECT_TRUE(l.indexer_values == 0 || l.indexer_values == c.index_head_dim);
        full += l.indexer_values > 0 ? 1 : 0;
        sum += l.bytes_per_token;
      }
      EXPECT_TRUE(p->kv.layers.back().mtp);
      EXPECT_GT(full, 0);
      EXPECT_EQ(p->kv.bytes_per_token,
                (layers * (c.kv_lora_rank + c.qk_rope_head_dim) + full * c.index_head_dim) * elem);
      EXPECT_EQ(p->kv.bytes_per_token, sum);
      auto kd = ParseKvCacheDtype(dtype);
      ASSERT_TRUE(kd.ok());
      EXPECT_EQ(p->kv.bytes_per_token, PagedKvStore::BytesPerToken(c, *kd));
    }
  }
}

TEST(MemoryPlan, ExplicitBudgetIsWholePagesPerRankAndReplica) {
  MemoryPlanOptions o = Options("tiny");
  o.max_total_tokens = 1000;
  o.page_size = 64;
  o.tp = 2;
  o.dp = 3;
  auto p = PlanMemory(o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->kv.automatic);
  EXPECT_EQ(p->kv.pages, 1000 / 64);
  EXPECT_EQ(p->kv.tokens, 1000 / 64 * 64);
  EXPECT_EQ(p->kv.bytes, p->kv.tokens * p->kv.bytes_per_token);
  ASSERT_EQ(p->ranks.size(), 2u);
  int64_t per_replica = 0, weights = 0;
  for (const RankPlan& r : p->ranks) {
    EXPECT_EQ(r.kv_bytes, p->kv.bytes);  // a whole KV copy on every rank
    EXPECT_GT(r.scratch_bytes, 0);
    EXPECT_EQ(r.weights.shard.size, 2);
    EXPECT_EQ(r.weights.shard.rank, r.tp_rank);
    per_replica += r.weights.anon_bytes + r.kv_bytes + r.scratch_bytes;
    weights += r.weights.anon_bytes;
  }
  EXPECT_EQ(p->process_bytes, 3 * per_replica);
  EXPECT_EQ(p->weights_bytes, 3 * weights);
  EXPECT_GE(p->load_peak_bytes, p->weights_bytes);
  // Under mpirun this process is one rank and holds only its part.
  o.mpi_rank = 1;
  o.dp = 1;
  auto m = PlanMemory(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->ranks.size(), 1u);
  EXPECT_EQ(m->ranks[0].tp_rank, 1);
  EXPECT_EQ(m->process_bytes, m->ranks[0].total_bytes());
  EXPECT_EQ(m->ranks[0].weights.anon_bytes, p->ranks[1].weights.anon_bytes);
}

TEST(MemoryPlan, AutomaticBudgetIsTheFractionLeftAfterTheWeights) {
  MemoryPlanOptions o = Options("tiny");
  o.available_bytes = int64_t{64} << 20;
  o.mem_fraction = 0.25;
  o.dp = 2;
  auto p = PlanMemory(o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->kv.automatic);
  const int64_t weights_one_replica = p->ranks[0].weights.anon_bytes;
  const double fraction = 0.25 / 2;
  const int64_t tokens = static_cast<int64_t>(fraction * static_cast<double>((int64_t{64} << 20) -
                                                                             weights_one_replica)) /
                         p->kv.bytes_per_token;
  EXPECT_EQ(p->kv.tokens, tokens / o.page_size * o.page_size);
  // Capped at every running request at full context.
  EXPECT_EQ(AutoKvTokens(0.5, int64_t{1} << 40, 100, 5000), 5000);
  EXPECT_EQ(AutoKvTokens(0.5, 1000, 100, 5000), 5);
}

TEST(MemoryPlan, APlanThatDoesNotFitNamesTheFlagsAndTheBudgetThatFits) {
  MemoryPlanOptions o = Options("tiny");
  o.max_total_tokens = 4 << 20;  // 4M tokens
  o.available_bytes = int64_t{256} << 20;
  auto p = PlanMemory(o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_GT(p->process_bytes, *o.available_bytes);
  const Status st = CheckPlansFit({*p}, *o.available_bytes);
  ASSERT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  for (const char* flag : {"--max-total-tokens", "--kv-cache-dtype fp8_e4m3", "--tp"}) {
    EXPECT_NE(st.message().find(flag), std::string::npos) << flag << ": " << st.message();
  }
  EXPECT_NE(st.message().find("nothing was loaded"), std::string::npos);
  // The suggested budget fits.
  const std::string key = "--max-total-tokens ";
  const size_t at = st.message().find(key);
  const int64_t suggested = std::stoll(st.message().substr(at + key.size()));
  ASSERT_GT(suggested, 0);
  o.max_total_tokens = suggested;
  auto q = PlanMemory(o);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(CheckPlansFit({*q}, *o.available_bytes).ok());
  o.max_total_tokens = suggested + 2 * o.page_size;  // and it is the largest that does
  auto r = PlanMemory(o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(CheckPlansFit({*r}, *o.available_bytes).ok());
  // Two models that fit alone may not fit together.
  EXPECT_TRUE(CheckPlansFit({*q}, q->process_bytes).ok());
  EXPECT_FALSE(CheckPlansFit({*q, *q}, q->process_bytes).ok());
}

TEST(MemoryPlan, DescribesWeightsKvScratchAndTotal) {
  MemoryPlanOptions o = Options("tiny-glm52");
  o.max_total_tokens = 4096;
  auto p = PlanMemory(o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string s = DescribePlan(*p);
  for (const char* part :
       {"memory plan for tiny-glm52", "bf16", "vectors", "derived", "KV cache bf16",
        "the MTP layer", "4096 tokens", "scratch", "rank 0", "this process"}) {
    EXPECT_NE(s.find(part), std::string::npos) << part << "\n" << s;
  }
}

TEST(MemoryPlan, BadInputsAreClearErrors) {
  MemoryPlanOptions o = Options("tiny");
  o.kv_cache_dtype = "fp4";
  auto dtype = PlanMemory(o);
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.status().message().find("kv_cache_dtype 'fp4'"), std::string::npos)
      << dtype.status().ToString();
  o = Options("tiny");
  o.page_size = 0;
  auto page = PlanMemory(o);
  ASSERT_FALSE(page.ok());
  EXPECT_NE(page.status().message().find("--page-size"), std::string::npos);
  o = Options("no-such-model");
  auto missing = PlanMemory(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("config.json"), std::string::npos)
      << missing.status().ToString();
  // A checkpoint whose safetensors header is cut short: the plan names the file.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mx_plan_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(TestCheckpointDir("tiny") + "/config.json", dir / "config.json");
  {
    std::ofstream f(dir / "model.safetensors", std::ios::binary);
    const char head[] = {64, 0, 0, 0, 0, 0, 0, 0, '{', '"'};
    f.write(head, sizeof(head));
  }
  o.model_dir = dir.string();
  auto cut = PlanMemory(o);
  fs::remove_all(dir);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("model.safetensors"), std::string::npos)
      << cut.status().ToString();
}

}  // namespace
}  // namespace mx
