// The model factory on the tiny checkpoint: what LoadModel assembles (kernels, EOS ids,
// tokenizer, MoE configs), its errors, and that the runner it makes computes what the model
// computes (whole) or the same tokens (two in-process ranks).
#include "engine/model_factory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "base/thread_pool.h"
#include "kv/paged_kv_store.h"

namespace mx::model_factory_test {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

LoadedModel MustLoad(ModelLoadOptions o) {
  auto m = LoadModel(o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : LoadedModel{};
}

// Last-row logits of `ids` as one prefill through `runner` on a fresh f32 store.
std::vector<float> RunnerLogits(ModelRunner& runner, const std::vector<int32_t>& ids) {
  PagedKvStore kv(runner.config(), 16, 4, KvCacheDtype::kF32);
  kv.PageTable(0) = {0, 1, 2, 3};
  ForwardBatch b;
  b.seqs.push_back({0, 0, ids, {}});
  auto out = runner.Forward(b, kv);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<float>{};
}

TEST(ModelFactory, LoadsKernelsModelEosTokenizerAndMoeConfigs) {
  LoadedModel m = MustLoad({.model_dir = kTiny});
  ASSERT_NE(m.model, nullptr);
  EXPECT_EQ(m.kernels->level, SelectKernels().level);
  EXPECT_EQ(m.kernels->bf16_activations, GemmActivations::kBf16);  // serve's default
  EXPECT_EQ(m.model_dir, kTiny);
  EXPECT_TRUE(m.shard.whole());
  EXPECT_EQ(m.model->config().vocab_size, 320);
  // config.json and generation_config.json, merged.
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{300, 307, 309}));
  ASSERT_TRUE(m.tokenizer.has_value());  // tokenizer.json is there
  EXPECT_FALSE(m.tokenizer->Encode("hello").empty());
  EXPECT_TRUE(m.moe.has_moe);

  LoadedModel untuned =
      MustLoad({.model_dir = kTiny, .untuned_moe = true, .tokenizer = TokenizerLoad::kNone});
  EXPECT_FALSE(untuned.moe.has_moe);  // default-constructed: no lookup at all
  EXPECT_FALSE(untuned.moe.tuned);
  EXPECT_FALSE(untuned.tokenizer.has_value());

  LoadedModel ref = MustLoad({.model_dir = kTiny,
                              .kernels = KernelLevel::kRef,
                              .gemm_activations = GemmActivations::kFp32});
  EXPECT_EQ(ref.kernels->level, KernelLevel::kRef);
  EXPECT_EQ(ref.kernels->bf16_activations, GemmActivations::kFp32);
}

TEST(ModelFactory, ErrorsNameTheFlagOrFile) {
  // The flags are parsed where they are read (kernels.h); an unknown value is named.
  auto bad_level = ParseKernelLevel("avx9");
  ASSERT_FALSE(bad_level.ok());
  EXPECT_EQ(bad_level.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_level.status().message().find("--kernels"), std::string::npos);
  EXPECT_NE(bad_level.status().message().find("avx9"), std::string::npos);
  EXPECT_EQ(*ParseKernelLevel("avx2"), KernelLevel::kAvx2);
  EXPECT_FALSE(ParseKernelLevel("")->has_value());  // this CPU's best

  auto bad_acts = ParseGemmActivations("int4");
  ASSERT_FALSE(bad_acts.ok());
  EXPECT_NE(bad_acts.status().message().find("int4"), std::string::npos);
  EXPECT_EQ(*ParseGemmActivations("fp32"), GemmActivations::kFp32);

  auto missing = LoadModel({.model_dir = "/nonexistent/model"});
  EXPECT_FALSE(missing.ok());

  // The model without its tokenizer files: fine unless the tokenizer is required.
  const fs::path dir = fs::temp_directory_path() / "mx_model_factory_no_tokenizer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json"}) {
    fs::copy_file(fs::path(kTiny) / f, dir / f);
  }
  LoadedModel no_tok = MustLoad({.model_dir = dir.string()});
  EXPECT_FALSE(no_tok.tokenizer.has_value());
  auto required = LoadModel({.model_dir = dir.string(), .tokenizer = TokenizerLoad::kRequired});
  ASSERT_FALSE(required.ok());
  EXPECT_NE(required.status().message().find("tokenizer.json"), std::string::npos)
      << required.status().ToString();
  fs::remove_all(dir);
}

TEST(ModelFactory, WholeRunnerComputesWhatTheModelComputes) {
  const std::vector<int32_t> ids = {5, 17, 200, 3, 44, 301, 9};
  LoadedModel m = MustLoad({.model_dir = kTiny, .tokenizer = TokenizerLoad::kNone});
  ASSERT_NE(m.model, nullptr);
  // The same forward straight through Model::Forward with the same kernels and MoE configs.
  std::vector<float> direct;
  {
    PagedKvStore kv(m.model->config(), 16, 4, KvCacheDtype::kF32);
    kv.PageTable(0) = {0, 1, 2, 3};
    ForwardBatch b;
    b.seqs.push_back({0, 0, ids, {}});
    ForwardOptions o;
    o.logits = LogitsMode::kLast;
    o.moe = m.moe.For(b);
    ThreadPool pool(1);
    auto out = m.model->Forward(b, o, kv, *m.kernels, pool);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    direct = out->logits;
  }
  auto runner = MakeModelRunner(m, 1);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  EXPECT_EQ(m.model, nullptr);  // the runner took it
  EXPECT_EQ((*runner)->threads(), 1);
  ASSERT_NE((*runner)->moe_tuning(), nullptr);
  EXPECT_TRUE((*runner)->moe_tuning()->has_moe);
  EXPECT_EQ(RunnerLogits(**runner, ids), direct);  // bit for bit
}

TEST(ModelFactory, InProcessTensorParallelRunnerAgreesWithTheWholeModel) {
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  LoadedModel whole = MustLoad({.model_dir = kTiny, .tokenizer = TokenizerLoad::kNone});
  auto one = MakeModelRunner(whole, 1);
  ASSERT_TRUE(one.ok());
  const std::vector<float> ref = RunnerLogits(**one, ids);

  LoadedModel rank0 = MustLoad(
      {.model_dir = kTiny, .shard = ModelShard{0, 2, false}, .tokenizer = TokenizerLoad::kNone});
  auto two = MakeModelRunner(rank0, 2);  // loads rank 1 itself
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  const std::vector<float> got = RunnerLogits(**two, ids);
  ASSERT_EQ(got.size(), ref.size());
  float max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(ref[i]));
    max_diff = std::max(max_diff, std::abs(got[i] - ref[i]));
  }
  // Sums split over two ranks round differently; the greedy token does not change.
  EXPECT_LE(max_diff, 1e-3f * std::max(1.0f, max_ref));
  EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
            std::max_element(ref.begin(), ref.end()) - ref.begin());
}

}  // namespace
}  // namespace mx::model_factory_test
