// A bf16 paged store is attended in place (KvStore::MlaRowsBf16, attend_rows_bf16); the same
// forward through a store that only widens rows (ReadMlaRow) must give the same bits: chunked
// prefill past index_topk (dense and sparse rows, absorbed after the first chunk) and decode
// steps, at every kernel level this CPU runs, with the pages scattered. The same for the indexer
// keys kept as panels (KvStore::IndexerPanelsBf16, indexer_scores_bf16).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention_kernels.h"
#include "kernels/kernels.h"
#include "kv/paged_kv_store.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace mx::paged_in_place_test {
namespace {

// Forwards everything to a paged store but keeps KvStore's MlaRowsBf16 (false: read widened).
class WideningStore final : public KvStore {
 public:
  explicit WideningStore(PagedKvStore& s) : s_(s) {}
  Status Reserve(int64_t seq, int64_t n) override { return s_.Reserve(seq, n); }
  void WriteMlaRow(int64_t seq, int64_t l, int64_t p, const float* r) override {
    s_.WriteMlaRow(seq, l, p, r);
  }
  void ReadMlaRow(int64_t seq, int64_t l, int64_t p, float* o) override {
    s_.ReadMlaRow(seq, l, p, o);
  }
  void WriteIndexerKeyRow(int64_t seq, int64_t l, int64_t p, const float* r) override {
    s_.WriteIndexerKeyRow(seq, l, p, r);
  }
  void ReadIndexerKeyRow(int64_t seq, int64_t l, int64_t p, float* o) override {
    s_.ReadIndexerKeyRow(seq, l, p, o);
  }

 private:
  PagedKvStore& s_;
};

std::vector<float> Forward(const Model& m, KvStore& kv, const std::vector<int32_t>& ids,
                           const KernelTable& kt, ThreadPool& pool) {
  ForwardOptions o;
  o.logits = LogitsMode::kAll;
  std::vector<float> logits;
  const int64_t n = static_cast<int64_t>(ids.size()), prompt = n - 4;
  for (int64_t b = 0; b < n;) {  // chunks of 9, then one token per step
    const int64_t e = b < prompt ? std::min(prompt, b + 9) : b + 1;
    ForwardBatch batch;
    batch.seqs.push_back({0, b, {ids.begin() + b, ids.begin() + e}, {}});
    auto out = m.Forward(batch, o, kv, kt, pool);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    logits.insert(logits.end(), out->logits.begin(), out->logits.end());
    b = e;
  }
  return logits;
}

TEST(PagedInPlace, Bf16RowsInPlaceGiveTheWidenedRowsBits) {
  auto loaded = Model::Load(TestCheckpointDir("tiny"), [](ModelConfig& c) { c.index_topk = 8; });
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& m = **loaded;
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(m.config().vocab_size) - 1);
  std::vector<int32_t> ids(40);
  for (auto& t : ids) t = tok(rng);
  constexpr int64_t kPages = 64;
  std::vector<int32_t> table(kPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  ThreadPool pool(2);
  // Pages of 4 keep the indexer keys as rows (read and widened); pages of 16 as panels, scored
  // in place.
  for (const int64_t kPage : {4, 16})
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      PagedKvStore direct(m.config(), kPage, kPages, KvCacheDtype::kBf16);
      PagedKvStore under(m.config(), kPage, kPages, KvCacheDtype::kBf16);
      direct.PageTable(0) = table;
      under.PageTable(0) = table;
      const uint16_t* probe = nullptr;
      const int64_t p0 = 0;
      ASSERT_TRUE(direct.MlaRowsBf16(0, 0, {&p0, 1}, &probe));  // the in-place paths are taken
      const int64_t full = m.config().mtp_layer_index();        // the MTP layer is full
      EXPECT_EQ(direct.IndexerPanelsBf16(0, full, 1, &probe), kPage % kIndexerPanel == 0);
      WideningStore widened(under);
      const std::vector<float> a = Forward(m, direct, ids, *kt, pool);
      const std::vector<float> b = Forward(m, widened, ids, *kt, pool);
      ASSERT_EQ(a.size(), ids.size() * m.config().vocab_size);
      EXPECT_EQ(a, b) << KernelLevelName(l) << " page " << kPage;
    }
}

// Decode steps over more than kAttendSegment keys give the same bits on 1, 2 and 3 threads: with
// fewer query rows than threads the absorbed attention splits a query's keys between them
// (attend_combine) and the indexer its key panels. Both stores: a bf16 paged one (rows attended
// and panels scored in place; pages of 16 in a shuffled table) and an fp32 one (rows read and
// widened first). 1,100 random tokens, index_topk 600 (sparse rows: 600 keys in two parts) and
// dense attention (every position: three parts).
TEST(PagedInPlace, LongDecodeIsTheSameBitsOnAnyThreadCount) {
  auto loaded =
      Model::Load(TestCheckpointDir("tiny-glm52"), [](ModelConfig& c) { c.index_topk = 600; });
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& m = **loaded;
  const int64_t V = m.config().vocab_size;
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(V) - 1);
  std::vector<int32_t> ids(1100);
  for (auto& t : ids) t = tok(rng);
  const auto n = static_cast<int64_t>(ids.size());
  constexpr int64_t kPage = 16, kPages = 72;
  std::vector<int32_t> table(kPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  for (const bool paged : {true, false})
    for (const bool dense : {false, true}) {
      ForwardOptions o;
      o.dense_attention = dense;
      std::vector<std::vector<float>> got;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        PagedKvStore pages(m.config(), kPage, kPages, KvCacheDtype::kBf16);
        pages.PageTable(0) = table;
        ContiguousKvStore rows(m.config(), n);
        rows.AddSequence();
        KvStore& kv = paged ? static_cast<KvStore&>(pages) : rows;
        std::vector<float> logits;
        for (int64_t b = 0; b < n;) {  // the prompt in one pass, then one token per step
          const int64_t e = b == 0 ? n - 2 : b + 1;
          ForwardBatch batch;
          batch.seqs.push_back({0, b, {ids.begin() + b, ids.begin() + e}, {}});
          auto out = m.Forward(batch, o, kv, SelectKernels(), pool);
          ASSERT_TRUE(out.ok()) << out.status().ToString();
          if (b > 0) logits.insert(logits.end(), out->logits.begin(), out->logits.end());
          b = e;
        }
        ASSERT_EQ(static_cast<int64_t>(logits.size()), 2 * V);
        for (float x : logits) ASSERT_TRUE(std::isfinite(x));
        got.push_back(std::move(logits));
      }
      const std::string what = std::string(paged ? "paged bf16" : "fp32 rows") +
                               (dense ? ", dense" : ", sparse") + ", seed=" + std::to_string(seed);
      EXPECT_EQ(got[1], got[0]) << "2 threads, " << what;
      EXPECT_EQ(got[2], got[0]) << "3 threads, " << what;
    }
}

}  // namespace
}  // namespace mx::paged_in_place_test
