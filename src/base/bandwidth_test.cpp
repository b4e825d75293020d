// The read-bandwidth probe returns a finite, plausible rate with one and two threads.
#include "base/bandwidth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace mx {
namespace {

TEST(Bandwidth, ProbeReturnsAPlausibleRate) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double gbps = MeasureReadBandwidthGBps(pool, size_t{32} << 20, 2);
    EXPECT_TRUE(std::isfinite(gbps)) << threads;
    // Any machine reads 32 MB in under 30 s and no DRAM or cache does 10 TB/s on 2 threads.
    EXPECT_GT(gbps, 32e6 / 30 / 1e9) << threads;
    EXPECT_LT(gbps, 1e4) << threads;
  }
}

TEST(Bandwidth, OddSizesAreRead) {
  ThreadPool pool(2);
  // A size that is not a multiple of a 64-byte line or of the threads' share.
  const double gbps = MeasureReadBandwidthGBps(pool, (size_t{1} << 20) + 24, 1);
  EXPECT_TRUE(std::isfinite(gbps));
  EXPECT_GT(gbps, 0);
}

// Every byte counts: the Σ of 64-bit words (little-endian, the tail byte by byte) on fresh random
// data at lengths around the 64-byte step and the 8 KB prefetch distance, with and without it.
TEST(Bandwidth, SumBytesReadsEveryByte) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<uint8_t> buf(20000 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int64_t n : {0, 1, 7, 63, 64, 65, 127, 8191, 8192, 8193, 20000}) {
    const uint8_t* p = buf.data() + rng() % 64;  // any alignment
    uint64_t want = 0;
    int64_t i = 0;
    for (; i + 8 <= n / 64 * 64; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      want += w;
    }
    for (; i < n; ++i) want += p[i];
    EXPECT_EQ(SumBytes(p, n, false), want) << n;
    EXPECT_EQ(SumBytes(p, n, true), want) << n;
  }
}

TEST(Bandwidth, ParsesSysfsCacheSizes) {
  EXPECT_EQ(ParseCacheSize("48K"), 48 << 10);
  EXPECT_EQ(ParseCacheSize("491520K"), int64_t{480} << 20);
  EXPECT_EQ(ParseCacheSize("480M"), int64_t{480} << 20);
  EXPECT_EQ(ParseCacheSize("1G"), int64_t{1} << 30);
  EXPECT_EQ(ParseCacheSize("512"), 512);
  for (const char* bad : {"", "K", "-4K", "12Q", "12KB", " 8K", "99999999999999999999", "2000G",
                          "9223372036854775807K"}) {
    EXPECT_EQ(ParseCacheSize(bad), 0) << "'" << bad << "'";
  }
}

TEST(Bandwidth, StreamBytesExceedTheLastLevelCache) {
  const int64_t llc = LastLevelCacheBytes();
  EXPECT_GE(llc, int64_t{1} << 10);  // at least a KB: a parsed size, not 0 or a bare "K"
  EXPECT_GE(StreamBytes(), std::min(4 * llc, int64_t{4} << 30));
  EXPECT_GE(StreamBytes(), int64_t{256} << 20);
  EXPECT_LE(StreamBytes(), int64_t{4} << 30);
}

}  // namespace
}  // namespace mx
