// Measures this machine's memory read bandwidth (GB/s) by streaming a buffer much larger than
// the caches through every pool thread, best of a few passes. Used by `generate` and the
// benchmarks to report achieved bandwidth as a fraction of what the machine can do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/thread_pool.h"

namespace mx {

// Each pass reads the buffer twice, with plain loads and with software prefetch 8 KB ahead
// (as the GEMV kernels read their weights); the best of all is returned. note: on the 2-core
// EPYC host in a high-latency period the plain read reached 40% of the prefetched one (2
// threads: 337-393 vs 128-138 µs for 6.7 MB), so a probe without prefetch understates what a
// kernel can pull and a "% of floor" above 100% follows.
// Σ of p[0, bytes) as 64-bit words (a tail under 64 bytes byte by byte), so that no load can
// be optimized away: the read of the probe and of the benchmarks' floors and cache flushes.
// `prefetch`: one prefetch per 64-byte line, 8 KB ahead (as the GEMV kernels read weights),
// never past `bytes`.
uint64_t SumBytes(const uint8_t* p, int64_t bytes, bool prefetch);

// `bytes` = 0: StreamBytes(), so that the probe reads memory and not the last-level cache.
double MeasureReadBandwidthGBps(ThreadPool& pool, size_t bytes = 0, int passes = 3);

// The largest cache of cpu0 in bytes (Linux sysfs, else sysconf), or 32 MB when neither says.
// note: on a part whose L3 is split between core complexes (AMD EPYC) this is one slice.
int64_t LastLevelCacheBytes();

// A sysfs cache size ("48K", "491520K", "480M", "1G", "512"), or 0 when `s` is not a number
// with an optional K/M/G suffix or exceeds 1 TB.
int64_t ParseCacheSize(std::string_view s);

// How much data a benchmark must stream through so that it reads memory, not a cache: 4 times
// the last-level cache, at least 256 MB and at most 4 GB (the probe allocates it). note: hosts of
// this project range from a 32 MB L3 (AMD EPYC) to a 480 MB one (an Intel Xeon with AMX), which
// held the old fixed 96-256 MB "streamed" buffers whole.
int64_t StreamBytes();

// Evicts the caches by reading a buffer of `bytes` (StreamBytes(): 4× the last-level cache)
// through `pool`, so that what is timed next reads its data from memory, as a forward step reads
// weights the rest of the step has evicted. `bytes` = 0 at construction: nothing allocated, and
// operator() does nothing (a benchmark's flush=0). Thread-safety: one call at a time.
class CacheFlusher {
 public:
  explicit CacheFlusher(ThreadPool& pool, size_t bytes = static_cast<size_t>(StreamBytes()));
  void operator()();

 private:
  ThreadPool& pool_;
  std::vector<uint8_t> buf_;
  std::vector<uint64_t> sums_;  // per worker, so that no read can be optimized away
};

}  // namespace mx
