// The in-process group's collectives against serial references on fresh random data, for group
// sizes 1..8 (odd ones included), empty to multi-MiB buffers, many repeated and mixed calls, and
// an abort that frees ranks blocked on a missing peer. Every group runs under a watchdog: a
// deadlock fails the test (and aborts the group) instead of hanging ctest.
#include "parallel/in_process_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "parallel/collective_test_util.h"

namespace mx {
namespace {

using mx::testing::AllReduceBound;
using mx::testing::RankData;
using mx::testing::ReferenceSum;
using mx::testing::SameFloats;

// Runs fn(comm) on one thread per rank; fails (and aborts the group) past `timeout`.
void RunGroup(int n, const std::function<void(Communicator&)>& fn,
              std::chrono::seconds timeout = std::chrono::seconds(60)) {
  InProcessGroup group(n);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      fn(group.rank(r));
      std::lock_guard<std::mutex> l(mu);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, timeout, [&] { return done == n; })) {
      ADD_FAILURE() << "group of " << n << " did not finish within " << timeout.count()
                    << " s (deadlock?)";
      l.unlock();
      group.Abort("test watchdog");
    }
  }
  for (auto& t : threads) t.join();
}

const int kSizes[] = {1, 2, 3, 4, 5, 7, 8};
const size_t kLengths[] = {0, 1, 15, 16, 17, 1000, 12345};

TEST(InProcessCommunicator, RankAndSize) {
  for (int n : kSizes) {
    std::vector<int> seen(n, -1);
    RunGroup(n, [&](Communicator& c) {
      EXPECT_EQ(c.size(), n);
      seen[c.rank()] = c.rank();
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(seen[r], r);
  }
}

// The documented numerics: bit-identical on every rank, equal to the rank-order float sum, and
// within (size - 1) * 2^-24 * sum |x| of the exact sum.
TEST(InProcessCommunicator, AllReduceSumMatchesSerialReference) {
  uint64_t trial = 0;
  for (int n : kSizes) {
    for (size_t len : kLengths) {
      ++trial;
      const auto ref = ReferenceSum(trial, n, len, /*integers=*/false);
      std::vector<float> serial(len, 0.0f);
      for (int r = 0; r < n; ++r) {
        std::vector<float> v = RankData(trial, r, len, false);
        for (size_t i = 0; i < len; ++i) serial[i] = r == 0 ? v[i] : serial[i] + v[i];
      }
      std::vector<std::vector<float>> results(n);
      RunGroup(n, [&](Communicator& c) {
        std::vector<float> v = RankData(trial, c.rank(), len, false);
        ASSERT_TRUE(c.AllReduceSum(v).ok());
        results[c.rank()] = std::move(v);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(results[r].size(), len);
        ASSERT_TRUE(SameFloats(results[r].data(), results[0].data(), len))
            << "rank " << r << " differs from rank 0 (n=" << n << ", len=" << len << ")";
      }
      for (size_t i = 0; i < len; ++i) {
        ASSERT_EQ(results[0][i], serial[i]) << "n=" << n << " len=" << len << " i=" << i;
        ASSERT_LE(std::fabs(results[0][i] - ref.sum[i]), AllReduceBound(n, ref.abs_sum[i]))
            << "n=" << n << " len=" << len << " i=" << i;
      }
    }
  }
}

TEST(InProcessCommunicator, AllReduceSumIsExactOnIntegers) {
  uint64_t trial = 100;
  for (int n : kSizes) {
    for (size_t len : {size_t{1}, size_t{33}, size_t{4099}}) {
      ++trial;
      const auto ref = ReferenceSum(trial, n, len, /*integers=*/true);
      RunGroup(n, [&](Communicator& c) {
        std::vector<float> v = RankData(trial, c.rank(), len, true);
        ASSERT_TRUE(c.AllReduceSum(v).ok());
        for (size_t i = 0; i < len; ++i) {
          ASSERT_EQ(static_cast<double>(v[i]), ref.sum[i]) << "rank " << c.rank() << " i=" << i;
        }
      });
    }
  }
}

TEST(InProcessCommunicator, AllReduceSumLargeBuffers) {
  for (int n : {2, 3, 4}) {
    const size_t len = (size_t{1} << 21) + 7;  // 8 MiB per rank, not a multiple of a slice
    const uint64_t trial = 200 + n;
    const auto ref = ReferenceSum(trial, n, len, false);
    RunGroup(n, [&](Communicator& c) {
      std::vector<float> v = RankData(trial, c.rank(), len, false);
      ASSERT_TRUE(c.AllReduceSum(v).ok());
      size_t bad = 0;
      for (size_t i = 0; i < len; ++i) {
        if (std::fabs(v[i] - ref.sum[i]) > AllReduceBound(n, ref.abs_sum[i])) ++bad;
      }
      EXPECT_EQ(bad, 0u) << "rank " << c.rank();
    });
  }
}

TEST(InProcessCommunicator, AllGatherConcatenatesInRankOrder) {
  uint64_t trial = 300;
  for (int n : kSizes) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 18}) {
      ++trial;
      RunGroup(n, [&](Communicator& c) {
        std::vector<float> in = RankData(trial, c.rank(), len, false);
        std::vector<float> out(len * n, -7.0f);
        ASSERT_TRUE(c.AllGather<float>(in, out).ok());
        for (int r = 0; r < n; ++r) {
          std::vector<float> want = RankData(trial, r, len, false);
          ASSERT_TRUE(SameFloats(out.data() + r * len, want.data(), len))
              << "rank " << c.rank() << " block " << r;
        }
      });
    }
  }
  // Typed form: token ids.
  RunGroup(3, [&](Communicator& c) {
    std::vector<int32_t> in = {c.rank() * 10, c.rank() * 10 + 1};
    std::vector<int32_t> out(6);
    ASSERT_TRUE(c.AllGather<int32_t>(in, out).ok());
    EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 10, 11, 20, 21}));
  });
}

TEST(InProcessCommunicator, BroadcastFromEveryRoot) {
  uint64_t trial = 400;
  for (int n : kSizes) {
    for (int root = 0; root < n; ++root) {
      for (size_t len : {size_t{0}, size_t{3}, size_t{4097}}) {
        ++trial;
        const std::vector<float> want = RankData(trial, root, len, false);
        RunGroup(n, [&](Communicator& c) {
          std::vector<float> v = RankData(trial, c.rank(), len, false);
          ASSERT_TRUE(c.Broadcast<float>(v, root).ok());
          ASSERT_TRUE(SameFloats(v.data(), want.data(), len))
              << "n=" << n << " root=" << root << " rank=" << c.rank();
        });
      }
    }
  }
}

// After a barrier every rank sees every other rank's writes from before it.
TEST(InProcessCommunicator, BarrierOrdersPhases) {
  for (int n : kSizes) {
    const int phases = 300;
    std::vector<std::atomic<int>> phase_of(n);
    RunGroup(n, [&](Communicator& c) {
      for (int p = 1; p <= phases; ++p) {
        phase_of[c.rank()].store(p, std::memory_order_relaxed);
        ASSERT_TRUE(c.Barrier().ok());
        for (int r = 0; r < n; ++r) {
          ASSERT_GE(phase_of[r].load(std::memory_order_relaxed), p) << "rank " << r;
        }
        ASSERT_TRUE(c.Barrier().ok());
      }
    });
  }
}

// Thousands of back-to-back collectives of random kinds and shapes.
TEST(InProcessCommunicator, RepeatedMixedCollectives) {
  for (int n : {2, 3, 5}) {
    RunGroup(n, [&](Communicator& c) { mx::testing::RunMixedCollectives(c, n, 2000); });
  }
}

// A rank that never arrives: Abort frees the others with Aborted instead of a hang, and later
// collectives fail fast.
TEST(InProcessCommunicator, AbortFreesBlockedRanks) {
  InProcessGroup group(3);
  std::vector<Status> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(10, 1.0f);
      got[r] = group.rank(r).AllReduceSum(v);
    });
  }
  // Abort once both ranks are inside the all-reduce, waiting for rank 2.
  while (group.ranks_waiting() < 2) std::this_thread::yield();
  group.Abort("rank 2 died");
  for (auto& t : threads) t.join();
  for (const Status& s : got) {
    EXPECT_EQ(s.code(), StatusCode::kAborted);
    EXPECT_NE(s.message().find("rank 2 died"), std::string::npos) << s.message();
  }
  EXPECT_EQ(group.rank(2).Barrier().code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace mx
