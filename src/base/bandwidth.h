// Measures this machine's memory read bandwidth (GB/s) by streaming a buffer much larger than
// the caches through every pool thread, best of a few passes. Used by `generate` and the
// benchmarks to report achieved bandwidth as a fraction of what the machine can do.
#pragma once

#include <cstddef>

#include "base/thread_pool.h"

namespace mx {

double MeasureReadBandwidthGBps(ThreadPool& pool, size_t bytes = size_t{256} << 20, int passes = 3);

}  // namespace mx
