// The read-bandwidth probe returns a finite, plausible rate with one and two threads.
#include "base/bandwidth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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
