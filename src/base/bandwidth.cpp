// Read-bandwidth probe: sums 64-bit words so the loads cannot be optimized away.
#include "base/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace mx {

uint64_t SumBytes(const uint8_t* p, int64_t bytes, bool prefetch) {
  constexpr int64_t kAhead = 8192;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    if (prefetch && i + kAhead < bytes) __builtin_prefetch(p + i + kAhead, 0, 3);
    uint64_t w[8];
    std::memcpy(w, p + i, 64);
    s0 += w[0] + w[4];
    s1 += w[1] + w[5];
    s2 += w[2] + w[6];
    s3 += w[3] + w[7];
  }
  for (; i < bytes; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

int64_t ParseCacheSize(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end == s.data() || v < 0) return 0;
  std::string_view rest(end, s.data() + s.size() - end);
  int shift = 0;
  if (!rest.empty()) {
    switch (rest[0]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      default:
        return 0;
    }
    rest.remove_prefix(1);
  }
  if (!rest.empty() || v > (int64_t{1} << (40 - shift))) return 0;
  return v << shift;
}

int64_t LastLevelCacheBytes() {
  static const int64_t bytes = [] {
    int64_t best = 0;
    for (int i = 0; i < 8; ++i) {
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      std::string s;
      if (f >> s) best = std::max(best, ParseCacheSize(s));
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best == 0) best = std::max<int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
    return best > 0 ? best : int64_t{32} << 20;
  }();
  return bytes;
}

int64_t StreamBytes() {
  return std::clamp(4 * LastLevelCacheBytes(), int64_t{256} << 20, int64_t{4} << 30);
}

CacheFlusher::CacheFlusher(ThreadPool& pool, size_t bytes)
    : pool_(pool), buf_(bytes, 1), sums_(static_cast<size_t>(pool.size())) {}

void CacheFlusher::operator()() {
  if (buf_.empty()) return;
  pool_.parallel_for(0, static_cast<int64_t>(buf_.size()), [&](int64_t lo, int64_t hi, int t) {
    sums_[t] += SumBytes(buf_.data() + lo, hi - lo, false);
  });
}

double MeasureReadBandwidthGBps(ThreadPool& pool, size_t bytes, int passes) {
  if (bytes == 0) bytes = static_cast<size_t>(StreamBytes());
  const size_t n = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  pool.parallel_for(0, static_cast<int64_t>(n), [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
  double best = 0;
  std::atomic<uint64_t> sink{0};
  for (int p = 0; p < passes; ++p) {
    for (bool prefetch : {false, true}) {
      auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(0, static_cast<int64_t>(n), [&](int64_t lo, int64_t hi, int) {
        sink += SumBytes(reinterpret_cast<const uint8_t*>(buf.data() + lo),
                         (hi - lo) * static_cast<int64_t>(sizeof(uint64_t)), prefetch);
      });
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s / 1e9);
    }
  }
  return sink.load() == 42 ? best + 1e-12 : best;
}

}  // namespace mx
