// A fixed pool of worker threads with a static-range parallel_for (and a dynamic one). The calling
// thread takes part as worker 0, so a pool of size 1 runs everything inline with no threads at all.
// A decode step makes hundreds of short parallel_for calls (one per GEMM), so waking a sleeping
// worker (a futex round trip, tens of µs) would cost a large share of it: after each call the
// workers, and the caller waiting for them, spin on atomics for up to `spin_us` before they
// block on the condition variables.
// Thread-safety: one parallel_for at a time per pool (calls from several threads serialize).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mx {

class ThreadPool {
 public:
  // n_threads <= 0 means one per core this process may run on (its CPU affinity).
  // spin_us: how long an idle worker polls for the next call before it sleeps.
  explicit ThreadPool(int n_threads = 0, int spin_us = kDefaultSpinUs);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Splits [begin, end) into size() contiguous ranges of near-equal length (static schedule)
  // and calls fn(lo, hi, worker) for each non-empty range; returns when all are done.
  void parallel_for(int64_t begin, int64_t end,
                    const std::function<void(int64_t lo, int64_t hi, int worker)>& fn);
  // The same with a dynamic schedule: every thread takes the next `grain` indices from a shared
  // counter until none are left, so fn(lo, hi, worker) runs once per chunk, on whichever thread
  // is free (tasks of unequal cost, or a thread the host stalls, no longer leave the other
  // waiting at the end). fn must not depend on which worker runs a chunk beyond its scratch.
  void parallel_for_dynamic(int64_t begin, int64_t end, int64_t grain,
                            const std::function<void(int64_t lo, int64_t hi, int worker)>& fn);

  static int HardwareThreads();
  static constexpr int kDefaultSpinUs = 200;

 private:
  void WorkerLoop(int worker);
  void Call(int64_t begin, int64_t end, int64_t grain,
            const std::function<void(int64_t, int64_t, int)>& fn);
  void RunShare(int worker);  // this thread's range, or chunks until none are left

  int n_threads_;
  int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serializes parallel_for callers
  // The call's range and function are written before generation_ is bumped (release) and read
  // after it is seen (acquire). mu_ only pairs the condition variables with their predicates.
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int64_t begin_ = 0, end_ = 0;
  int64_t grain_ = 0;  // 0: static ranges; else chunks from next_
  std::atomic<int64_t> next_{0};
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
};

}  // namespace mx
