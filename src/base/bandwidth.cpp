// Read-bandwidth probe: sums 64-bit words so the loads cannot be optimized away.
#include "base/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace mx {

double MeasureReadBandwidthGBps(ThreadPool& pool, size_t bytes, int passes) {
  const size_t n = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  pool.parallel_for(0, static_cast<int64_t>(n), [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
  double best = 0;
  std::atomic<uint64_t> sink{0};
  for (int p = 0; p < passes; ++p) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(0, static_cast<int64_t>(n), [&](int64_t lo, int64_t hi, int) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = lo;
      for (; i + 4 <= hi; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      for (; i < hi; ++i) s0 += buf[i];
      sink += s0 + s1 + s2 + s3;
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  return sink.load() == 42 ? best + 1e-12 : best;
}

}  // namespace mx
