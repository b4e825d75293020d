// ThreadPool: generation-counted start signal, countdown completion.
#include "base/thread_pool.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

namespace mx {

int ThreadPool::HardwareThreads() {
  // The cores this process may run on (mpirun binds each rank to its share, taskset / cgroups
  // cpusets narrow it too), not every core of the machine.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads, int spin_us)
    : n_threads_(n_threads > 0 ? n_threads : HardwareThreads()), spin_us_(std::max(spin_us, 0)) {
  for (int w = 1; w < n_threads_; ++w) workers_.emplace_back([this, w] { WorkerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {

void RangeOf(int64_t begin, int64_t end, int parts, int index, int64_t* lo, int64_t* hi) {
  const int64_t n = end - begin;
  const int64_t base = n / parts, rem = n % parts;
  *lo = begin + index * base + std::min<int64_t>(index, rem);
  *hi = *lo + base + (index < rem ? 1 : 0);
}

// Polls `done` for up to `us` microseconds (the clock is read every 64 polls); true if it held.
template <typename Pred>
bool SpinUntil(int us, Pred done) {
  if (us <= 0) return done();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (int i = 0;; ++i) {
    if (done()) return true;
    _mm_pause();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) return done();
  }
}

}  // namespace

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  const auto called = [&] {
    return stop_.load(std::memory_order_acquire) ||
           generation_.load(std::memory_order_acquire) != seen;
  };
  for (;;) {
    if (!SpinUntil(spin_us_, called)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, called);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    RunShare(worker);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The caller may be between its predicate check and its wait: taking mu_ orders this
      // notify after either.
      { std::lock_guard<std::mutex> lock(mu_); }
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::RunShare(int worker) {
  if (grain_ == 0) {
    int64_t lo, hi;
    RangeOf(begin_, end_, n_threads_, worker, &lo, &hi);
    if (lo < hi) (*fn_)(lo, hi, worker);
    return;
  }
  for (;;) {
    const int64_t lo = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (lo >= end_) return;
    (*fn_)(lo, std::min(lo + grain_, end_), worker);
  }
}

void ThreadPool::parallel_for(int64_t begin, int64_t end,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  Call(begin, end, 0, fn);
}

void ThreadPool::parallel_for_dynamic(int64_t begin, int64_t end, int64_t grain,
                                      const std::function<void(int64_t, int64_t, int)>& fn) {
  Call(begin, end, std::max<int64_t>(grain, 1), fn);
}

void ThreadPool::Call(int64_t begin, int64_t end, int64_t grain,
                      const std::function<void(int64_t, int64_t, int)>& fn) {
  if (end <= begin) return;
  if (n_threads_ == 1 || end - begin == 1) {  // inline, in the same chunks
    const int64_t step = grain == 0 ? end - begin : grain;
    for (int64_t lo = begin; lo < end; lo += step) fn(lo, std::min(lo + step, end), 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  fn_ = &fn;
  begin_ = begin;
  end_ = end;
  grain_ = grain;
  next_.store(begin, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  { std::lock_guard<std::mutex> lock(mu_); }  // a worker about to sleep sees the new generation
  start_cv_.notify_all();
  RunShare(0);
  const auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(spin_us_, all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  fn_ = nullptr;
}

}  // namespace mx
