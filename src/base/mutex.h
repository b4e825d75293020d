// A mutex, its scoped lock and a condition variable that clang's thread-safety analysis
// understands (base/thread_annotations.h): thin wrappers over std::mutex, std::unique_lock
// and std::condition_variable, with no behaviour of their own.
//
//   Mutex mu_;
//   std::deque<T> q_ GUARDED_BY(mu_);
//   MutexLock l(mu_);
//   while (q_.empty()) cv_.Wait(l);  // a loop, so the analysis sees the lock held
//
// Thread-safety: Mutex and CondVar are shared between threads; a MutexLock belongs to the
// thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace mx {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

class CondVar {
 public:
  // Releases the lock's mutex until notified (or a spurious wake-up), then holds it again.
  void Wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  // As Wait, giving up at `deadline`; false when it was reached.
  template <class Clock, class Duration>
  bool WaitUntil(MutexLock& lock, std::chrono::time_point<Clock, Duration> deadline) {
    return cv_.wait_until(lock.lock_, deadline) == std::cv_status::no_timeout;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace mx
