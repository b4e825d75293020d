#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace mx {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    std::mt19937 rng(threads);
    for (int rep = 0; rep < 50; ++rep) {
      int64_t n = rng() % 1000;
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> calls{0};
      pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int worker) {
        EXPECT_LT(lo, hi);
        EXPECT_GE(worker, 0);
        EXPECT_LT(worker, threads);
        for (int64_t i = lo; i < hi; ++i) hits[i]++;
        calls++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
      EXPECT_LE(calls.load(), threads);
    }
  }
}

// The dynamic schedule: every index exactly once, in chunks of at most `grain` that start at
// begin + a multiple of grain, whatever the thread count; a static call after it is static again.
TEST(ThreadPool, DynamicChunksCoverEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    std::mt19937 rng(100 + threads);
    for (int rep = 0; rep < 50; ++rep) {
      const int64_t begin = rng() % 7, n = rng() % 700, grain = 1 + rng() % 9;
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad{0};
      pool.parallel_for_dynamic(begin, begin + n, grain, [&](int64_t lo, int64_t hi, int worker) {
        if (lo >= hi || hi - lo > grain || (lo - begin) % grain != 0 || worker < 0 ||
            worker >= threads) {
          bad++;
        }
        for (int64_t i = lo; i < hi; ++i) hits[i - begin]++;
      });
      EXPECT_EQ(bad.load(), 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
    }
  }
  ThreadPool pool(4);
  std::vector<std::pair<int64_t, int64_t>> ranges(4, {-1, -1});
  pool.parallel_for(10, 20, [&](int64_t lo, int64_t hi, int w) { ranges[w] = {lo, hi}; });
  EXPECT_EQ(ranges[3], std::make_pair(int64_t{18}, int64_t{20}));
}

TEST(ThreadPool, StaticRangesAreContiguousAndBalanced) {
  ThreadPool pool(4);
  std::vector<std::pair<int64_t, int64_t>> ranges(4, {-1, -1});
  pool.parallel_for(10, 20, [&](int64_t lo, int64_t hi, int w) { ranges[w] = {lo, hi}; });
  EXPECT_EQ(ranges[0], std::make_pair(int64_t{10}, int64_t{13}));
  EXPECT_EQ(ranges[1], std::make_pair(int64_t{13}, int64_t{16}));
  EXPECT_EQ(ranges[2], std::make_pair(int64_t{16}, int64_t{18}));
  EXPECT_EQ(ranges[3], std::make_pair(int64_t{18}, int64_t{20}));
}

TEST(ThreadPool, ConcurrentCallersSerialize) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 100; ++r) {
        pool.parallel_for(0, 100, [&](int64_t lo, int64_t hi, int) { total += hi - lo; });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 100 * 100);
}

// Calls that find the workers spinning, calls that find them asleep (spin 0, and spin 200 µs
// with pauses longer than that between calls), and calls back to back: every one runs every
// worker's range once and returns only after all of them (a lost wake-up would hang here,
// a missed completion would show as a short count).
TEST(ThreadPool, WakesSpinningAndSleepingWorkers) {
  for (int spin_us : {0, 200, 100000}) {
    ThreadPool pool(3, spin_us);
    for (int rep = 0; rep < 300; ++rep) {
      std::atomic<int64_t> total{0};
      std::atomic<int> ran{0};
      pool.parallel_for(0, 30, [&](int64_t lo, int64_t hi, int) {
        total += hi - lo;
        ran++;
      });
      ASSERT_EQ(total.load(), 30) << "spin " << spin_us << " rep " << rep;
      ASSERT_EQ(ran.load(), 3);
      if (rep % 50 == 49) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }
}

}  // namespace
}  // namespace mx
