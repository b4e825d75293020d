// The fp8 KV cache against the reference fixtures (tests/data/README.md): the bf16 test
// checkpoints run with every MLA row and indexer key stored as fp8 e4m3 in the paged store,
// at every kernel level. fp8 keeps 3 mantissa bits, so each cached value moves by up to 2^-4
// relative and near-tie choices may flip: the budget is Agreement's (model_test_util.h), as
// for bf16 activations. A wrong scale (x / s stored, x · s read) or a wrong byte format moves
// every attention output and fails it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kv/paged_kv_store.h"
#include "model/model_test_util.h"

namespace mx::paged_kv_fixture_test {
namespace {

// T = 3 logits within this fraction of their scale; mean KLD; top-1 (T > 3: at T = 3 one near
// tie is a third); indexer top-k and router agreement. The indexer keys lose most: in these
// random tiny models their scores are close, and 3 mantissa bits flip a sixth of the top-k
// entries at the longest prompt.
constexpr double kFp8ActTol = 5e-2;
constexpr double kFp8Kld = 0.15;
constexpr double kFp8Top1Rate = 0.75;
constexpr double kFp8TopkRate = 0.75;
constexpr double kFp8RouterRate = 0.85;
// Every layer's scale: stored = x / s. Not 1, so that a scale applied the wrong way round
// (stored x · s, or read without · s) moves every row.
constexpr float kLayerScale = 1.0f / 16;

struct Case {
  std::string ckpt;
  int64_t T;
  KernelLevel level;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.ckpt << " T=" << c.T << " " << KernelLevelName(c.level);
}

class Fp8KvFixtureTest : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8KvFixtureTest, PrefillStaysWithinTheFp8Budget) {
  const Case& cs = GetParam();
  const Model& model = TestModel(cs.ckpt);
  const ModelConfig& c = model.config();
  auto fx = OpenFixture(cs.ckpt, cs.T);
  const int64_t page = 16, n_pages = (cs.T + page - 1) / page;
  std::vector<float> scales(c.num_hidden_layers + 1, kLayerScale);
  PagedKvStore kv(c, page, n_pages, KvCacheDtype::kFp8E4M3Fn, scales);
  for (int32_t p = 0; p < n_pages; ++p) kv.PageTable(0).push_back(n_pages - 1 - p);
  ForwardBatch batch;
  SequenceInput s;
  s.seq = 0;
  s.tokens = I32(*fx, "prompt_ids");
  s.mtp_next = I32(*fx, "mtp_next_ids");
  batch.seqs.push_back(s);
  ForwardOptions opts;
  opts.logits = LogitsMode::kAll;
  opts.want_topk = opts.want_router = true;
  ThreadPool pool(2);
  auto out = model.Forward(batch, opts, kv, *GetKernelTable(cs.level), pool);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Agreement a = Compare(c, *out, *fx, cs.T);
  std::printf(
      "[%s T=%lld %s fp8 kv] logits max abs %.2e (scale %.2e), mean KLD %.2e, top-1 %lld/%lld, "
      "top-k %lld/%lld, router %lld/%lld\n",
      cs.ckpt.c_str(), static_cast<long long>(cs.T), KernelLevelName(cs.level), a.e_logits, a.scale,
      a.kld, static_cast<long long>(a.top1), static_cast<long long>(cs.T),
      static_cast<long long>(a.same), static_cast<long long>(a.total),
      static_cast<long long>(a.r_same), static_cast<long long>(a.r_total));
  if (cs.T <= 3) {
    EXPECT_LE(a.e_logits, kFp8ActTol * a.scale);
  }
  if (cs.T > 3) {
    EXPECT_GE(a.top1, cs.T * kFp8Top1Rate);
  }
  EXPECT_LE(a.kld, kFp8Kld);
  EXPECT_GE(a.same, a.total * kFp8TopkRate);
  EXPECT_GE(a.r_same, a.r_total * kFp8RouterRate);
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (GetKernelTable(l) == nullptr) continue;
    for (const char* ck : {"tiny", "tiny-glm52"}) {
      for (int64_t T : {3, 17, 40, 130}) v.push_back({ck, T, l});
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8KvFixtureTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           std::string n = info.param.ckpt + "_" + std::to_string(info.param.T) +
                                           "_" + KernelLevelName(info.param.level);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace mx::paged_kv_fixture_test
