// A long prompt (many times index_topk, so most rows attend only their DSA top-k set) prefilled
// in chunks of several sizes gives the logits and indexer top-k sets of one pass. The chunks
// exercise every MLA path: dense rows expanded (one pass, large chunks) or absorbed (small
// chunks after a long cached context: the cost rule in mla.cpp), sparse rows absorbed, and the
// indexer over keys written by earlier chunks.
// Tolerance: kChunkTol = 2e-5 max abs on logits (the forms accumulate in different orders, as
// in model_equivalence_test.cpp); the top-k sets are exact.
#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace mx::long_prompt_test {
namespace {

constexpr double kChunkTol = 2e-5;

ForwardOutput Prefill(const Model& m, const std::vector<int32_t>& ids, int64_t chunk,
                      ThreadPool& pool) {
  ContiguousKvStore kv(m.config(), 256);
  const int64_t seq = kv.AddSequence();
  ForwardOptions o;
  o.logits = LogitsMode::kAll;
  o.want_topk = true;
  ForwardOutput all;
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    ForwardBatch batch;
    batch.seqs.push_back({seq, b, {ids.begin() + b, ids.begin() + e}, {}});
    auto out = m.Forward(batch, o, kv, SelectKernels(), pool);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    all.logits.insert(all.logits.end(), out->logits.begin(), out->logits.end());
    all.topk.resize(out->topk.size());
    for (size_t l = 0; l < out->topk.size(); ++l) {
      all.topk[l].insert(all.topk[l].end(), out->topk[l].begin(), out->topk[l].end());
    }
  }
  return all;
}

class LongPromptTest : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(LongPromptTest, ChunkedPrefillEqualsOnePass) {
  const auto& [ckpt, index_topk] = GetParam();
  auto loaded = Model::Load(TestCheckpointDir(ckpt), [&](ModelConfig& c) {
    if (index_topk > 0) c.index_topk = index_topk;
  });
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& m = **loaded;
  const std::vector<int32_t> ids = I32(*OpenFixture(ckpt, 130), "prompt_ids");
  ASSERT_GE(static_cast<int64_t>(ids.size()), 4 * m.config().index_topk);
  ThreadPool pool(2);
  const ForwardOutput one = Prefill(m, ids, static_cast<int64_t>(ids.size()), pool);
  ASSERT_EQ(one.logits.size(), ids.size() * m.config().vocab_size);
  for (int64_t chunk : {1, 7, 32, 50}) {
    const ForwardOutput c = Prefill(m, ids, chunk, pool);
    const double e = MaxAbsDiff(c.logits, one.logits);
    EXPECT_LE(e, kChunkTol) << "chunk " << chunk;
    EXPECT_EQ(c.topk, one.topk) << "chunk " << chunk;
    std::printf("[%s K=%lld] chunk %lld vs one pass: logits max abs %.2e\n", ckpt.c_str(),
                static_cast<long long>(m.config().index_topk), static_cast<long long>(chunk), e);
  }
}

// index_topk 8 (the checkpoints': 16x shorter than the prompt) and 32 (a 32-row dense prefix,
// which small chunks attend absorbed and large ones expanded).
INSTANTIATE_TEST_SUITE_P(Checkpoints, LongPromptTest,
                         ::testing::Combine(::testing::Values("tiny", "tiny-glm52"),
                                            ::testing::Values(0, 32)),
                         [](const auto& info) {
                           const std::string c = std::get<0>(info.param);
                           return (c == "tiny" ? std::string("tiny") : std::string("tiny_glm52")) +
                                  "_topk" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace mx::long_prompt_test
