// ThreadPool: generation-counted start signal, countdown completion.
#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>

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

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : HardwareThreads()) {
  for (int w = 1; w < n_threads_; ++w) workers_.emplace_back([this, w] { WorkerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
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
}  // namespace

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* fn = fn_;
    const int64_t b = begin_, e = end_;
    lock.unlock();
    int64_t lo, hi;
    RangeOf(b, e, n_threads_, worker, &lo, &hi);
    if (lo < hi) (*fn)(lo, hi, worker);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t begin, int64_t end,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (end <= begin) return;
  if (n_threads_ == 1 || end - begin == 1) {
    fn(begin, end, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    begin_ = begin;
    end_ = end;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t lo, hi;
  RangeOf(begin, end, n_threads_, 0, &lo, &hi);
  if (lo < hi) fn(lo, hi, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

}  // namespace mx
