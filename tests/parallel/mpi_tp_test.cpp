// Tensor / expert parallelism over MPI (`mpirun -np N`, tests/parallel/run_mpi.sh): rank 0 drives
// the TP runner (engine/tp_runner.h) over the MPI communicator with a paged KV store, the other
// ranks run RunTpWorker, and rank 0's greedy tokens and logits must match the whole model, which
// it also loads, on both test checkpoints and the bundled model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/tp_runner.h"
#include "kv/paged_kv_store.h"
#include "model/model.h"
#include "mpi_gtest_main.h"
#include "parallel/mpi_communicator.h"

namespace mx {
namespace {

Communicator* g_comm = nullptr;  // the world, made in main()

// As src/model/model_parallel_test.cpp: sharding changes only the fp32 summation order.
constexpr float kTpLogitTolerance = 2e-3f;

struct Case {
  std::string name;
  std::string dir;
  bool ep;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Prefill a random prompt, then greedy decode, through `runner` on a paged store whose pages are
// handed out in order; returns the tokens and the prefill's last-row logits.
std::pair<std::vector<int32_t>, std::vector<float>> Greedy(ModelRunner& runner, int steps) {
  const ModelConfig& c = runner.config();
  constexpr int64_t kPage = 8;
  PagedKvStore kv(c, kPage, 32, KvCacheDtype::kF32);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size) - 1);
  std::vector<int32_t> prompt(30);
  for (auto& t : prompt) t = tok(rng);
  // Pages in a shuffled order, so a worker that ignored the driver's table reads wrong rows.
  std::vector<int32_t> pages(32);
  for (int i = 0; i < 32; ++i) pages[i] = (i * 7) % 32;
  auto& table = kv.PageTable(4);
  auto cover = [&](int64_t n) {
    while (static_cast<int64_t>(table.size()) * kPage < n) table.push_back(pages[table.size()]);
  };
  std::vector<int32_t> out;
  std::vector<float> first;
  ForwardBatch b;
  b.seqs.push_back({4, 0, prompt, {}, false});
  cover(static_cast<int64_t>(prompt.size()));
  auto l = runner.Forward(b, kv);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return {};
  first = *l;
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < steps; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(l->begin(), l->end()) - l->begin());
    out.push_back(next);
    ForwardBatch d;
    d.seqs.push_back({4, pos, {next}, {}, false});
    cover(++pos);
    l = runner.Forward(d, kv);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (!l.ok()) return {};
  }
  return {out, first};
}

class MpiTpTest : public ::testing::TestWithParam<Case> {};

TEST_P(MpiTpTest, SameGreedyTokensAsTheWholeModel) {
  const Case& c = GetParam();
  Communicator& comm = *g_comm;
  const ModelShard shard{comm.rank(), comm.size(), c.ep};
  auto model = Model::Load(c.dir, nullptr, shard);
  ASSERT_TRUE(model.ok()) << model.status().ToString();  // every rank loads, or none does
  const KernelTable& kt = SelectKernels();
  if (comm.rank() != 0) {
    Status st = RunTpWorker(**model, comm, kt, 1, {});
    EXPECT_TRUE(st.ok()) << st.ToString();
    return;
  }
  auto driver = MakeTpDriverRunner(std::move(model).value(), comm, kt, 1, {});
  const auto [tokens, logits] = Greedy(*driver, 24);
  driver.reset();  // the workers stop
  auto whole = Model::Load(c.dir);
  ASSERT_TRUE(whole.ok());
  auto one = MakeModelRunner(std::move(whole).value(), kt, 1);
  const auto [ref_tokens, ref_logits] = Greedy(*one, 24);
  EXPECT_EQ(tokens, ref_tokens);
  ASSERT_EQ(logits.size(), ref_logits.size());
  float worst = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    ASSERT_TRUE(std::isfinite(logits[i]));
    worst = std::max(worst, std::fabs(logits[i] - ref_logits[i]));
  }
  EXPECT_LE(worst, kTpLogitTolerance);
}

const std::string kData = MX_TEST_DATA_DIR;
const std::string kBundled = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";

INSTANTIATE_TEST_SUITE_P(Checkpoints, MpiTpTest,
                         ::testing::Values(Case{"tiny_tp", kData + "/tiny", false},
                                           Case{"tiny_glm52_tp", kData + "/tiny-glm52", false},
                                           Case{"tiny_glm52_ep", kData + "/tiny-glm52", true},
                                           Case{"bundled_tp", kBundled, false},
                                           Case{"bundled_ep", kBundled, true}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mx

int main(int argc, char** argv) { return mx::testing::RunMpiTests(argc, argv, &mx::g_comm); }
