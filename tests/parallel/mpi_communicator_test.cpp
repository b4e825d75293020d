// The MPI Communicator under `mpirun -np N` (tests/parallel/run_mpi.sh): every rank runs the same
// tests in the same order. Each rank regenerates every rank's random data from the trial seed,
// so it can check the collective against a serial reference on its own; results are also
// compared across ranks (all-reduce must be bit-identical everywhere).
#include <gtest/gtest.h>

#include <cstring>

#include "mpi_gtest_main.h"
#include "parallel/collective_test_util.h"
#include "parallel/mpi_communicator.h"

namespace mx {
namespace {

using mx::testing::AllReduceBound;
using mx::testing::RankData;
using mx::testing::ReferenceSum;
using mx::testing::SameFloats;

Communicator* g_comm = nullptr;  // the world, made in main()

TEST(MpiCommunicator, WorldHasSeveralRanks) {
  ASSERT_TRUE(MpiBuilt());
  EXPECT_GE(g_comm->size(), 2) << "run under mpirun -np 2 or more";
  EXPECT_GE(g_comm->rank(), 0);
  EXPECT_LT(g_comm->rank(), g_comm->size());
}

TEST(MpiCommunicator, AllReduceSumMatchesSerialReferenceOnEveryRank) {
  Communicator& c = *g_comm;
  const int n = c.size();
  uint64_t trial = 0;
  for (size_t len : {size_t{1}, size_t{17}, size_t{1000}, size_t{12345}, (size_t{1} << 20) + 3}) {
    for (bool integers : {false, true}) {
      ++trial;
      std::vector<float> v = RankData(trial, c.rank(), len, integers);
      ASSERT_TRUE(c.AllReduceSum(v).ok());
      const auto ref = ReferenceSum(trial, n, len, integers);
      for (size_t i = 0; i < len; ++i) {
        if (integers) {
          ASSERT_EQ(static_cast<double>(v[i]), ref.sum[i]) << "len " << len << " i " << i;
        } else {
          ASSERT_LE(std::fabs(v[i] - ref.sum[i]), AllReduceBound(n, ref.abs_sum[i]))
              << "len " << len << " i " << i;
        }
      }
      // Bit-identical on every rank: gather everyone's result and compare with ours.
      std::vector<float> all(len * n);
      ASSERT_TRUE(c.AllGather<float>(v, all).ok());
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(SameFloats(all.data() + r * len, v.data(), len))
            << "rank " << r << " got a different all-reduce result (len " << len << ")";
      }
    }
  }
}

TEST(MpiCommunicator, AllGatherAndBroadcast) {
  Communicator& c = *g_comm;
  const int n = c.size();
  uint64_t trial = 100;
  for (size_t len : {size_t{0}, size_t{1}, size_t{999}, size_t{1} << 18}) {
    ++trial;
    std::vector<float> in = RankData(trial, c.rank(), len, false);
    std::vector<float> out(len * n, -1.0f);
    ASSERT_TRUE(c.AllGather<float>(in, out).ok());
    for (int r = 0; r < n; ++r) {
      std::vector<float> want = RankData(trial, r, len, false);
      ASSERT_TRUE(SameFloats(out.data() + r * len, want.data(), len));
    }
    for (int root = 0; root < n; ++root) {
      std::vector<float> v = RankData(trial + 50, c.rank(), len, false);
      ASSERT_TRUE(c.Broadcast<float>(v, root).ok());
      std::vector<float> want = RankData(trial + 50, root, len, false);
      ASSERT_TRUE(SameFloats(v.data(), want.data(), len)) << "root " << root;
    }
  }
}

TEST(MpiCommunicator, RepeatedMixedCollectives) {
  mx::testing::RunMixedCollectives(*g_comm, 42, 500);
}

}  // namespace
}  // namespace mx

int main(int argc, char** argv) { return mx::testing::RunMpiTests(argc, argv, &mx::g_comm); }
