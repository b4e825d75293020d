// The weight plan against what a load actually holds: for every committed test checkpoint
// (bf16, FP8, MXFP4, GLM-5.2-shaped) and shard (whole, tp 2 ranks 0 and 1, ep 2), the plan's
// anonymous and mapped bytes equal the bytes the loaded ModelWeights own and view, counted by
// walking them; its checkpoint bytes equal the sum of the safetensors header sizes of the
// tensors the loader reads. A plan of a checkpoint the loader refuses fails with the loader's
// message, before any data is read.
#include "model/weight_plan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "base/page_cache_test_util.h"
#include "kernels/fp8.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace mx {
namespace {

// Bytes a loaded weight holds: owned (anonymous) and viewed in the mapped file.
struct Held {
  int64_t anon = 0, mapped = 0;
};

void Walk(const LinearWeight& w, Held& h) {
  h.anon += static_cast<int64_t>(
      w.owned_f32.size() * 4 + w.owned_bf16.size() * 2 + w.owned_mx_q.size() + w.owned_mx_e.size() +
      w.owned_fp8_s.size() * 4 + w.owned_fp8p.size() + w.owned_fp8p_s.size() * 4);
  if (w.dtype == DType::kF8_E4M3 && !w.empty()) {
    if (w.owned_mx_q.empty()) h.mapped += w.n * w.k;  // codes viewed in the file
    if (w.owned_fp8_s.empty()) {
      h.mapped += 4 * ((w.fp8_phase + w.n + kFp8Block - 1) / kFp8Block) * Fp8ScaleCols(w.k);
    }
  }
}
void Walk(const std::vector<float>& v, Held& h) { h.anon += static_cast<int64_t>(v.size() * 4); }
void Walk(const MlpWeights& m, Held& h) {
  Walk(m.gate_proj, h);
  Walk(m.up_proj, h);
  Walk(m.down_proj, h);
}
void Walk(const LayerWeights& l, Held& h) {
  for (const auto* v : {&l.input_layernorm, &l.post_attention_layernorm, &l.attn.q_a_layernorm,
                        &l.attn.kv_a_layernorm}) {
    Walk(*v, h);
  }
  for (const LinearWeight* w : {&l.attn.q_a_proj, &l.attn.q_b_proj, &l.attn.kv_a_proj_with_mqa,
                                &l.attn.kv_b_proj, &l.attn.o_proj, &l.attn.kv_b_uk_t}) {
    Walk(*w, h);
  }
  if (l.has_indexer) {
    Walk(l.indexer.wq_b, h);
    Walk(l.indexer.wk, h);
    Walk(l.indexer.weights_proj, h);
    Walk(l.indexer.k_norm_weight, h);
    Walk(l.indexer.k_norm_bias, h);
  }
  if (!l.is_moe) {
    Walk(l.mlp, h);
    return;
  }
  Walk(l.moe.gate, h);
  Walk(l.moe.e_score_correction_bias, h);
  for (const MlpWeights& e : l.moe.experts) Walk(e, h);
  if (l.moe.has_shared) Walk(l.moe.shared_experts, h);
}
Held Walk(const ModelWeights& w) {
  Held h;
  Walk(w.embed_tokens, h);
  Walk(w.norm, h);
  Walk(w.lm_head, h);
  for (const LayerWeights& l : w.layers) Walk(l, h);
  if (w.has_mtp) {
    Walk(w.mtp.enorm, h);
    Walk(w.mtp.hnorm, h);
    Walk(w.mtp.eh_proj, h);
    Walk(w.mtp.shared_head_norm, h);
    Walk(w.mtp.layer, h);
  }
  return h;
}

struct Opened {
  ModelConfig config;
  Checkpoint ckpt;
};
Opened Open(const std::string& dir) {
  auto c = LoadModelConfig(dir + "/config.json");
  auto k = Checkpoint::Open(dir);
  EXPECT_TRUE(c.ok() && k.ok());
  return {std::move(c).value(), std::move(k).value()};
}

class WeightPlanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightPlanTest, EqualsWhatEachShardsLoadHolds) {
  const std::string dir = TestModelDir(GetParam());
  Opened o = Open(dir);
  for (const ModelShard& shard :
       {ModelShard{}, ModelShard{0, 2, false}, ModelShard{1, 2, false}, ModelShard{1, 2, true}}) {
    SCOPED_TRACE(shard.Describe());
    auto plan = PlanWeights(o.config, o.ckpt, shard);
    auto model = Model::Load(dir, nullptr, shard);
    ASSERT_EQ(plan.ok(), model.ok()) << plan.status().ToString() << model.status().ToString();
    if (!plan.ok()) {
      // Refused by both, with the loader's words.
      EXPECT_NE(model.status().message().find(plan.status().message()), std::string::npos)
          << plan.status().ToString() << "\n"
          << model.status().ToString();
      continue;
    }
    const Held held = Walk((*model)->weights());
    EXPECT_EQ(plan->anon_bytes, held.anon);
    EXPECT_EQ(plan->mapped_bytes, held.mapped);
    int64_t anon = 0, mapped = 0, file = 0;
    for (const WeightFormatPlan& f : plan->formats) {
      EXPECT_GT(f.tensors, 0) << f.format;
      EXPECT_FALSE(f.where.empty()) << f.format;
      anon += f.anon_bytes;
      mapped += f.mapped_bytes;
      file += f.file_bytes;
    }
    EXPECT_EQ(anon, plan->anon_bytes);
    EXPECT_EQ(mapped, plan->mapped_bytes);
    EXPECT_EQ(file, plan->file_bytes);
    EXPECT_GE(plan->largest_transient_bytes, 0);
  }
}

// The whole model's checkpoint bytes: every tensor in the files except those the loader does
// not read (the FP8 KV scales, the indexer weights of IndexShare layers), by the headers.
TEST_P(WeightPlanTest, WholeModelReadsEveryTensorItLoads) {
  const std::string dir = TestModelDir(GetParam());
  Opened o = Open(dir);
  auto plan = PlanWeights(o.config, o.ckpt);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<TensorSpec> specs = ExpectedTensors(o.config);
  const CheckpointReport r = CheckCheckpoint(o.config, specs, o.ckpt);
  std::set<std::string> unread(r.ignored.begin(), r.ignored.end());
  unread.insert(r.kv_scales.begin(), r.kv_scales.end());
  int64_t bytes = 0, weights = 0;
  for (const TensorView* v : o.ckpt.tensors()) {
    if (unread.count(v->name) != 0) continue;
    bytes += static_cast<int64_t>(v->nbytes);
    const bool scale = v->name.ends_with("weight_scale") || v->name.ends_with("weight_scale_inv");
    weights += scale ? 0 : 1;
  }
  EXPECT_EQ(plan->file_bytes, bytes);
  EXPECT_EQ(plan->tensors, weights);
  EXPECT_EQ(plan->shard.size, 1);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, WeightPlanTest,
                         ::testing::Values("tiny", "tiny-fp8", "tiny-glm52", "tiny-glm52-fp8",
                                           "tiny-mxfp4"));

// A whole-model load leaves in the page cache only what it uses in place: every whole page of a
// tensor it copied (tiny: all of them) is evicted, so the checkpoint does not sit in memory
// beside its copy, while tiny-fp8's stored codes, viewed in place, all stay cached (its F32
// scales, viewed when aligned, are not judged). The checkpoint is a synced copy in a temporary
// directory, every page of it cached before the load.
TEST(WeightLoad, CopiedTensorsLeaveThePageCacheViewedOnesStay) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (const std::string name : {"tiny", "tiny-fp8"}) {
    SCOPED_TRACE(name);
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) / ("mx_dropcache_" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::copy(TestCheckpointDir(name), dir, std::filesystem::copy_options::recursive);
    const std::string file = (dir / "model.safetensors").string();
    {
      // Cached in single pages (the page cache drops whole folios only, and the larger ones a
      // write or a readahead makes may hold the header or a neighbour too): synced, evicted,
      // then read back a page at a time without readahead.
      const int fd = ::open(file.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::fsync(fd), 0);  // clean pages: dirty ones are never dropped
      ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
      ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
      std::vector<char> buf(page);
      for (off_t at = 0; ::pread(fd, buf.data(), page, at) > 0;) at += static_cast<off_t>(page);
      ::close(fd);
    }
    const std::vector<bool> before = CachedPages(file);
    if (before.empty()) GTEST_SKIP() << "no page cache apart from the file here (tmpfs)";
    ASSERT_EQ(before, std::vector<bool>(before.size(), true));
    auto model = Model::Load(dir.string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const std::vector<bool> after = CachedPages(file);
    ASSERT_EQ(after.size(), before.size());
    // The tensors' offsets from a header parse (a mapping, never read past the header here).
    auto st = SafetensorsFile::Open(file);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    const uint8_t* base = (*st)->tensors().front().map->data();
    int evicted = 0, copied = 0, kept = 0, viewed = 0;
    for (const TensorView& t : (*st)->tensors()) {
      if (t.dtype == DType::kF32) continue;  // FP8 scales: viewed when aligned
      const bool view = t.dtype == DType::kF8_E4M3;
      const auto off = static_cast<size_t>(t.data - base);
      for (size_t p = (off + page - 1) / page; (p + 1) * page <= off + t.nbytes; ++p) {
        ++(view ? viewed : copied);
        if (view) kept += after[p] ? 1 : 0;
        if (!view) evicted += after[p] ? 0 : 1;
      }
    }
    EXPECT_GT(copied, 0);
    EXPECT_EQ(evicted, copied) << "copied pages left in the page cache";
    EXPECT_EQ(kept, viewed) << "viewed pages evicted";
    if (name == "tiny-fp8") EXPECT_GT(viewed, 0);
    std::filesystem::remove_all(dir);
  }
}

TEST(WeightPlan, BundledModelIsBf16RepackedWithItsAbsorbedKeys) {
  Opened o = Open(std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m");
  auto plan = PlanWeights(o.config, o.ckpt);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::set<std::string> formats;
  for (const WeightFormatPlan& f : plan->formats) formats.insert(f.format);
  EXPECT_EQ(formats, (std::set<std::string>{"bf16", "vectors", "derived"}));
  EXPECT_EQ(plan->mapped_bytes, 0);  // every bf16 matrix is repacked: nothing used in place
  EXPECT_GE(plan->anon_bytes, plan->file_bytes);  // packing pads, vectors widen, keys derived
}

TEST(WeightPlan, AMismatchedCheckpointIsRefusedAsTheLoaderRefusesIt) {
  // tiny's tensors under tiny-glm52's config: every shape disagrees.
  Opened o = Open(TestCheckpointDir("tiny"));
  auto other = LoadModelConfig(TestCheckpointDir("tiny-glm52") + "/config.json");
  ASSERT_TRUE(other.ok());
  auto plan = PlanWeights(*other, o.ckpt);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("checkpoint does not match its config"), std::string::npos)
      << plan.status().ToString();
  auto shard = PlanWeights(o.config, o.ckpt, ModelShard{0, 3, false});
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("--tp 3"), std::string::npos)
      << shard.status().ToString();
}

}  // namespace
}  // namespace mx
