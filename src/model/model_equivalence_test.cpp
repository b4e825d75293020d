// Forward-pass invariants that do not need the reference: prefill of N tokens equals N
// one-token decodes; absorbed MLA equals expanded MLA; with index_topk >= length the sparse
// path equals dense attention exactly; a batch of sequences gives each the same result as
// running it alone (mixed prefill + decode too); a mismatched checkpoint is one Status listing
// its problems.
// Tolerances: kStepTol = 2e-5 max abs on logits (fp32 accumulation order differs between the
// forms); batching and sparse == dense are exact (each row's arithmetic is unchanged).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace mx {
namespace {

constexpr double kStepTol = 2e-5;

std::vector<int32_t> Prompt(const std::string& ckpt, int64_t T) {
  return I32(*OpenFixture(ckpt, T), "prompt_ids");
}

ForwardOutput RunForward(const Model& m, KvStore& kv, const ForwardBatch& b,
                         const ForwardOptions& o, ThreadPool& pool) {
  auto out = m.Forward(b, o, kv, SelectKernels(), pool);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : ForwardOutput{};
}

class EquivalenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EquivalenceTest, PrefillEqualsOneTokenDecodes) {
  const Model& m = TestModel(GetParam());
  const int64_t V = m.config().vocab_size, K = m.config().index_topk;
  const std::vector<int32_t> ids = Prompt(GetParam(), 40);
  ThreadPool pool(2);
  ForwardOptions all;
  all.logits = LogitsMode::kAll;
  all.want_topk = true;
  ContiguousKvStore kv1(m.config(), 64), kv2(m.config(), 64);
  ForwardBatch b;
  b.seqs.push_back({kv1.AddSequence(), 0, ids, ids});  // with MTP: its rows must match too
  const ForwardOutput pre = RunForward(m, kv1, b, all, pool);
  const int64_t s2 = kv2.AddSequence();
  double e = 0, e_mtp = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    ForwardBatch d;
    d.seqs.push_back({s2, static_cast<int64_t>(t), {ids[t]}, {ids[t]}});
    const ForwardOutput o = RunForward(m, kv2, d, all, pool);
    std::vector<float> want(pre.logits.begin() + t * V, pre.logits.begin() + (t + 1) * V);
    e = std::max(e, MaxAbsDiff(o.logits, want));
    std::vector<float> want_mtp(pre.mtp_logits.begin() + t * V,
                                pre.mtp_logits.begin() + (t + 1) * V);
    e_mtp = std::max(e_mtp, MaxAbsDiff(o.mtp_logits, want_mtp));
    for (size_t l = 0; l < o.topk.size(); ++l) {
      std::vector<int32_t> want_topk(pre.topk[l].begin() + t * K,
                                     pre.topk[l].begin() + (t + 1) * K);
      EXPECT_EQ(o.topk[l], want_topk) << "layer " << l << " step " << t;
    }
  }
  EXPECT_LE(e, kStepTol);
  EXPECT_LE(e_mtp, kStepTol);
  std::printf("[%s] prefill vs decode max abs: logits %.2e mtp %.2e\n", GetParam().c_str(), e,
              e_mtp);
}

TEST_P(EquivalenceTest, AbsorbedEqualsExpanded) {
  const Model& m = TestModel(GetParam());
  const std::vector<int32_t> ids = Prompt(GetParam(), 130);
  ThreadPool pool(1);
  ForwardOptions o;
  o.logits = LogitsMode::kAll;
  o.want_topk = true;
  std::vector<ForwardOutput> outs;
  for (MlaForm f : {MlaForm::kExpanded, MlaForm::kAbsorbed}) {
    o.mla_form = f;
    ContiguousKvStore kv(m.config(), 256);
    ForwardBatch b;
    b.seqs.push_back({kv.AddSequence(), 0, ids, ids});
    outs.push_back(RunForward(m, kv, b, o, pool));
  }
  const double e = MaxAbsDiff(outs[0].logits, outs[1].logits);
  EXPECT_LE(e, kStepTol);
  EXPECT_LE(MaxAbsDiff(outs[0].mtp_logits, outs[1].mtp_logits), kStepTol);
  EXPECT_EQ(outs[0].topk, outs[1].topk);
  std::printf("[%s] absorbed vs expanded max abs: logits %.2e\n", GetParam().c_str(), e);
}

TEST_P(EquivalenceTest, SparseEqualsDenseWhenTopkCoversTheContext) {
  auto loaded =
      Model::Load(TestCheckpointDir(GetParam()), [](ModelConfig& c) { c.index_topk = 256; });
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& m = **loaded;
  const std::vector<int32_t> ids = Prompt(GetParam(), 130);
  ThreadPool pool(1);
  ForwardOptions o;
  o.logits = LogitsMode::kAll;
  std::vector<ForwardOutput> outs;
  for (bool dense : {false, true}) {
    o.dense_attention = dense;
    ContiguousKvStore kv(m.config(), 256);
    ForwardBatch b;
    b.seqs.push_back({kv.AddSequence(), 0, ids, ids});
    outs.push_back(RunForward(m, kv, b, o, pool));
  }
  EXPECT_EQ(outs[0].logits, outs[1].logits);
  EXPECT_EQ(outs[0].mtp_logits, outs[1].mtp_logits);
  // ... and the real index_topk does change the result at this length (the test has teeth).
  o.dense_attention = false;
  ContiguousKvStore kv(m.config(), 256);
  ForwardBatch b;
  b.seqs.push_back({kv.AddSequence(), 0, ids, {}});
  const ForwardOutput sparse = RunForward(TestModel(GetParam()), kv, b, o, pool);
  EXPECT_GT(MaxAbsDiff(sparse.logits, outs[0].logits), 1e-3);
}

TEST_P(EquivalenceTest, BatchOfFourEqualsEachAlone) {
  const Model& m = TestModel(GetParam());
  const int64_t V = m.config().vocab_size;
  const std::vector<int32_t> full = Prompt(GetParam(), 130);
  // Four different sequences: different lengths and different tokens.
  std::vector<std::vector<int32_t>> seqs = {{full.begin(), full.begin() + 3},
                                            {full.begin() + 5, full.begin() + 22},
                                            {full.begin() + 50, full.begin() + 90},
                                            {full.begin(), full.end()}};
  ThreadPool pool(2);
  ForwardOptions o;
  o.logits = LogitsMode::kAll;
  std::vector<ForwardOutput> alone;
  for (const auto& ids : seqs) {
    ContiguousKvStore kv(m.config(), 256);
    ForwardBatch b;
    b.seqs.push_back({kv.AddSequence(), 0, ids, ids});
    alone.push_back(RunForward(m, kv, b, o, pool));
  }
  ContiguousKvStore kv(m.config(), 256);
  ForwardBatch b;
  for (const auto& ids : seqs) b.seqs.push_back({kv.AddSequence(), 0, ids, ids});
  const ForwardOutput together = RunForward(m, kv, b, o, pool);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t r0 = together.row_begin[s], r1 = together.row_begin[s + 1];
    std::vector<float> got(together.logits.begin() + r0 * V, together.logits.begin() + r1 * V);
    EXPECT_EQ(got, alone[s].logits) << "sequence " << s;
    std::vector<float> got_mtp(together.mtp_logits.begin() + r0 * V,
                               together.mtp_logits.begin() + r1 * V);
    EXPECT_EQ(got_mtp, alone[s].mtp_logits) << "sequence " << s;
  }

  // Mixed step: sequence 0 decodes one token while a new sequence prefills.
  ForwardBatch mixed;
  mixed.seqs.push_back({b.seqs[0].seq, 3, {full[3]}, {}});
  mixed.seqs.push_back({kv.AddSequence(), 0, seqs[1], {}});
  const ForwardOutput mo = RunForward(m, kv, mixed, o, pool);
  ContiguousKvStore kv1(m.config(), 256);
  ForwardBatch one;
  one.seqs.push_back({kv1.AddSequence(), 0, {full.begin(), full.begin() + 4}, {}});
  const ForwardOutput ref = RunForward(m, kv1, one, o, pool);
  std::vector<float> want(ref.logits.end() - V, ref.logits.end());
  std::vector<float> got(mo.logits.begin(), mo.logits.begin() + V);
  EXPECT_LE(MaxAbsDiff(got, want), kStepTol);
  std::vector<float> got1(mo.logits.begin() + V, mo.logits.end());
  EXPECT_EQ(got1, alone[1].logits);
}

// prune_last_layer: the last layer's queries, attention and MLP for the logit rows only give
// the same logits (within kStepTol: a lone query row may take the absorbed form where the whole
// prompt took the expanded one) and write the same KV (the next decode step's logits are the
// same bits); MTP rows in the batch turn it off.
TEST_P(EquivalenceTest, PruningTheLastLayerKeepsLogitsAndKv) {
  const Model& m = TestModel(GetParam());
  const std::vector<int32_t> ids = Prompt(GetParam(), 130);
  ThreadPool pool(2);
  std::vector<std::vector<float>> logits, next;
  std::vector<std::vector<int64_t>> rows;
  for (bool prune : {false, true}) {
    ForwardOptions o;
    o.prune_last_layer = prune;
    ContiguousKvStore kv(m.config(), 160);
    const int64_t a = kv.AddSequence(), b = kv.AddSequence(), c = kv.AddSequence();
    ForwardBatch first;  // c's first 5 tokens, so that it decodes in the mixed step
    first.seqs.push_back({c, 0, {ids.begin(), ids.begin() + 5}, {}});
    RunForward(m, kv, first, o, pool);
    ForwardBatch mixed;
    mixed.seqs.push_back({a, 0, {ids.begin(), ids.begin() + 120}, {}});
    SequenceInput verify{b, 0, {ids.begin() + 3, ids.begin() + 17}, {}};
    verify.all_logits = true;  // several logit rows of one sequence
    mixed.seqs.push_back(verify);
    mixed.seqs.push_back({c, 5, {ids[5]}, {}});
    const ForwardOutput out = RunForward(m, kv, mixed, o, pool);
    EXPECT_EQ(out.final_hidden.empty(), prune);
    logits.push_back(out.logits);
    rows.push_back(out.logit_rows);
    ForwardBatch after;  // reads every layer's KV of the pruned step
    after.seqs.push_back({a, 120, {ids[120]}, {}});
    after.seqs.push_back({b, 14, {ids[30]}, {}});
    after.seqs.push_back({c, 6, {ids[6]}, {}});
    next.push_back(RunForward(m, kv, after, o, pool).logits);
  }
  ASSERT_EQ(rows[0].size(), 1u + 14u + 1u);
  EXPECT_EQ(rows[1], rows[0]);
  ASSERT_EQ(logits[1].size(), logits[0].size());
  EXPECT_LE(MaxAbsDiff(logits[1], logits[0]), kStepTol);
  EXPECT_EQ(next[1], next[0]);
  for (float x : logits[1]) ASSERT_TRUE(std::isfinite(x));

  ForwardOptions o;
  o.prune_last_layer = true;
  ContiguousKvStore kv(m.config(), 64);
  ForwardBatch b;
  b.seqs.push_back({kv.AddSequence(), 0, {ids.begin(), ids.begin() + 8}, {}});
  if (m.config().num_nextn_predict_layers > 0) {  // MTP rows read every row's final hidden
    b.seqs[0].mtp_next.assign(ids.begin() + 1, ids.begin() + 9);
    const ForwardOutput out = RunForward(m, kv, b, o, pool);
    EXPECT_EQ(out.final_hidden.size(), 8u * m.config().hidden_size);
    EXPECT_EQ(out.mtp_rows.size(), 8u);
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, EquivalenceTest, ::testing::Values("tiny", "tiny-glm52"),
                         [](const auto& info) {
                           return std::string(info.param == "tiny" ? "tiny" : "tiny_glm52");
                         });

TEST(ModelErrors, BadRequestsAreStatuses) {
  const Model& m = TestModel("tiny");
  ContiguousKvStore kv(m.config(), 8);
  ThreadPool pool(1);
  ForwardOptions o;
  const int64_t s = kv.AddSequence();
  ForwardBatch bad_token;
  bad_token.seqs.push_back({s, 0, {static_cast<int32_t>(m.config().vocab_size)}, {}});
  EXPECT_EQ(m.Forward(bad_token, o, kv, SelectKernels(), pool).status().code(),
            StatusCode::kInvalidArgument);
  ForwardBatch too_long;
  too_long.seqs.push_back({s, 0, std::vector<int32_t>(9, 1), {}});
  EXPECT_EQ(m.Forward(too_long, o, kv, SelectKernels(), pool).status().code(),
            StatusCode::kResourceExhausted);
  ForwardBatch twice;
  twice.seqs.push_back({s, 0, {1}, {}});
  twice.seqs.push_back({s, 1, {1}, {}});
  EXPECT_EQ(m.Forward(twice, o, kv, SelectKernels(), pool).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ModelErrors, MismatchedCheckpointListsEveryProblem) {
  // tiny-glm52's config over tiny's tensors: every shape differs.
  const auto dir = std::filesystem::temp_directory_path() / "mx_model_mismatch_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(TestCheckpointDir("tiny-glm52") + "/config.json", dir / "config.json");
  std::filesystem::create_symlink(TestCheckpointDir("tiny") + "/model.safetensors",
                                  dir / "model.safetensors");
  auto r = Model::Load(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.1.mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_a_proj.weight"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mx
