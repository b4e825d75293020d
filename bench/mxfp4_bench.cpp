// MXFP4 × activation GEMV/GEMM against the bf16 GEMM at expert-sized shapes (GLM-5:
// hidden 6144, moe_intermediate 2048), one thread (stream2_: two), per kernel level. Counters:
// weight bytes read per second (weights_GBps), that as a percentage of the 1-thread read bandwidth
// (floor_pct: 100 = the call takes exactly weight bytes / bandwidth) and multiply-adds per
// second; the ratio mxfp4 / bf16 at the same level and shape is the figure of merit (docs:
// issue 7). The plain benchmarks reuse one weight copy, which the L3 may hold; the
// `stream_` ones cycle through copies worth 4× the L3, so every call reads its weights from
// memory, as a decode step reads each expert once; `stream2_` ones do that with 2 threads (wall
// time, floor from the 2-thread bandwidth), as decode runs here. Before the benchmarks the
// program measures the read bandwidth with 1 and 2 threads (base/bandwidth.h, best of 5, as
// bench/model_bench does).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "base/bandwidth.h"
#include "base/numerics.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"

namespace mx {
namespace {

struct Weights {
  std::vector<uint8_t> q, e;
  std::vector<uint16_t> bf16;
  std::vector<float> x;
};

double g_bw1 = 0, g_bw2 = 0;  // GB/s, 1 and 2 threads

const Weights& Get(int64_t m, int64_t n, int64_t k) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, Weights> cache;
  Weights& w = cache[{m, n, k}];
  if (w.q.empty()) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> byte(0, 255), ex(120, 130);
    std::normal_distribution<float> nd;
    w.q.resize(Mxfp4PackedCodeBytes(n, k));
    for (auto& v : w.q) v = uint8_t(byte(rng));
    w.e.resize(Mxfp4PackedScaleBytes(n, k));
    for (auto& v : w.e) v = uint8_t(ex(rng));
    w.bf16.resize(n * k);
    for (auto& v : w.bf16) v = F32ToBf16(nd(rng));
    w.x.resize(m * k);
    for (auto& v : w.x) v = nd(rng);
  }
  return w;
}

// Copies of Get(m, n, k)'s weights of one format, together StreamBytes() (base/bandwidth.h: 4×
// the last-level cache, at least 256 MB), so that cycling through them reads memory. One set per
// format and weight count n·k (every streamed shape here has 2048·6144 weights, so interleaved
// repetitions never rebuild a set; its bytes are the first such shape's, equally random).
// The reference stays valid until a call with another n·k of that format.
const std::vector<Weights>& Copies(int64_t m, int64_t n, int64_t k, bool mxfp4) {
  static std::map<bool, std::pair<int64_t, std::vector<Weights>>> sets;
  auto& [numel, c] = sets[mxfp4];
  if (numel != n * k) {
    c.clear();
    numel = n * k;
    const Weights& w = Get(m, n, k);
    const double bytes = mxfp4 ? n * k * 17.0 / 32 : n * k * 2.0;
    c.resize(std::max<size_t>(2, static_cast<size_t>(StreamBytes() / bytes) + 1));
    for (Weights& v : c) {
      if (mxfp4) {
        v.q = w.q;
        v.e = w.e;
      } else {
        v.bf16 = w.bf16;
      }
    }
  }
  return c;
}

void Run(benchmark::State& st, KernelLevel level, bool mxfp4, bool stream, int threads = 1) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const KernelTable* kt = GetKernelTable(level);
  if (kt == nullptr) {
    st.SkipWithError("level not available");
    return;
  }
  const Weights& w = Get(m, n, k);
  const std::vector<Weights>* copies = stream ? &Copies(m, n, k, mxfp4) : nullptr;
  ThreadPool pool(threads);
  std::vector<float> y(m * n);
  size_t c = 0;
  for (auto _ : st) {
    const Weights& v = copies != nullptr ? (*copies)[c++ % copies->size()] : w;
    if (mxfp4) {
      GemmMxfp4(*kt, pool, w.x.data(), m, k, v.q.data(), v.e.data(), n, y.data());
    } else {
      GemmBf16(*kt, pool, w.x.data(), m, k, v.bf16.data(), n, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = mxfp4 ? n * k * 17.0 / 32 : n * k * 2.0;
  st.counters["weights_GBps"] =
      benchmark::Counter(bytes * 1e-9 * st.iterations(), benchmark::Counter::kIsRate);
  st.counters["floor_pct"] =
      benchmark::Counter(100 * bytes * 1e-9 / (threads == 1 ? g_bw1 : g_bw2) * st.iterations(),
                         benchmark::Counter::kIsRate);
  st.counters["GMAC/s"] =
      benchmark::Counter(1e-9 * m * n * k * st.iterations(), benchmark::Counter::kIsRate);
}

// The floor measured beside the kernels: the same streamed MXFP4 weight copies (codes and
// scales, row range by row range through the same pool) read by base/bandwidth.h's SumBytes. With
// --benchmark_enable_random_interleaving the repetitions of a kernel and of this read alternate, so
// their ratio is taken in the same minutes of a noisy host rather than against one probe at program
// start. `prefetch` (readpf_): the read also prefetches 8 KB ahead into L1, as the AVX-512 kernel
// does; on a slow host one core's plain read stays far behind what that pulls (the kernel beat it
// by 30-40% in such a period), so this is the tighter floor: what one thread gets with the kernel's
// own access hints.
void Read(benchmark::State& st, int threads, bool prefetch = false) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const std::vector<Weights>& copies = Copies(m, n, k, /*mxfp4=*/true);
  ThreadPool pool(threads);
  uint64_t sink = 0;
  size_t c = 0;
  std::vector<uint64_t> part(threads);
  for (auto _ : st) {
    const Weights& v = copies[c++ % copies.size()];
    pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int t) {
      part[t] = SumBytes(v.q.data() + lo * k / 2, (hi - lo) * k / 2, prefetch) +
                SumBytes(v.e.data() + lo * k / 32, (hi - lo) * k / 32, prefetch);
    });
    for (uint64_t p : part) sink += p;
    benchmark::DoNotOptimize(sink);
  }
  const double bytes = n * k * 17.0 / 32;
  st.counters["weights_GBps"] =
      benchmark::Counter(bytes * 1e-9 * st.iterations(), benchmark::Counter::kIsRate);
}

// Best of the repetitions (--benchmark_repetitions), beside Google Benchmark's mean / median.
void Min(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics(
      "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
  b->Unit(benchmark::kMicrosecond);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 8, 32}) {
    b->Args({m, 2048, 6144});  // gate/up
    b->Args({m, 6144, 2048});  // down
  }
  b->Args({64, 2048, 6144});  // prefill-sized expert batch
  Min(b);
}

void DecodeShapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 8}) b->Args({m, 2048, 6144});
  b->Args({1, 6144, 2048});
  Min(b);
}

// GEMVs of the same 6.7 MB of MXFP4 weights with rows of 1024 ... 12288 weights (docs: the
// streamed kernel's time grows with the row length at equal bytes; the plain read does not).
void RowLengths(benchmark::internal::Benchmark* b) {
  for (int64_t k : {1024, 4096, 12288}) b->Args({1, 2048 * 6144 / k, k});
}

// Two threads, as `generate` / `serve` decode on this 2-core host: wall time (the rate
// counters follow it), the floor from the 2-thread bandwidth.
void DecodeShapes2(benchmark::internal::Benchmark* b) {
  DecodeShapes(b);
  b->UseRealTime();
}

BENCHMARK_CAPTURE(Run, mxfp4_ref, KernelLevel::kRef, true, false)
    ->Args({1, 2048, 6144})
    ->Apply(Min);
BENCHMARK_CAPTURE(Run, mxfp4_avx2, KernelLevel::kAvx2, true, false)->Apply(Shapes);
BENCHMARK_CAPTURE(Run, mxfp4_avx512, KernelLevel::kAvx512, true, false)->Apply(Shapes);
BENCHMARK_CAPTURE(Run, bf16_avx2, KernelLevel::kAvx2, false, false)->Apply(Shapes);
BENCHMARK_CAPTURE(Run, stream_mxfp4_avx2, KernelLevel::kAvx2, true, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(Run, stream_mxfp4_avx512, KernelLevel::kAvx512, true, true)
    ->Apply(DecodeShapes)
    ->Apply(RowLengths);
BENCHMARK_CAPTURE(Run, stream_bf16_avx2, KernelLevel::kAvx2, false, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(Run, stream_bf16_avx512, KernelLevel::kAvx512, false, true)->Apply(DecodeShapes);
BENCHMARK_CAPTURE(Run, stream2_mxfp4_avx512, KernelLevel::kAvx512, true, true, 2)
    ->Apply(DecodeShapes2);
BENCHMARK_CAPTURE(Run, stream2_bf16_avx512, KernelLevel::kAvx512, false, true, 2)
    ->Apply(DecodeShapes2);
BENCHMARK_CAPTURE(Read, read_mxfp4, 1)->Apply(DecodeShapes)->Apply(RowLengths);
BENCHMARK_CAPTURE(Read, read2_mxfp4, 2)->Apply(DecodeShapes2);
BENCHMARK_CAPTURE(Read, readpf_mxfp4, 1, true)->Apply(DecodeShapes)->Apply(RowLengths);
BENCHMARK_CAPTURE(Read, readpf2_mxfp4, 2, true)->Apply(DecodeShapes2);

}  // namespace
}  // namespace mx

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  {
    mx::ThreadPool one(1), two(2);
    for (int i = 0; i < 5; ++i) {
      mx::g_bw1 = std::max(mx::g_bw1, mx::MeasureReadBandwidthGBps(one));
      mx::g_bw2 = std::max(mx::g_bw2, mx::MeasureReadBandwidthGBps(two));
    }
  }
  std::printf(
      "last-level cache %.0f MB; read bandwidth (base/bandwidth.h, %.0f MB, best of 5): 1 thread "
      "%.1f GB/s, 2 threads %.1f "
      "GB/s; MXFP4 GEMV 1x2048x6144 floor (6.68 MB at 4.25 bits/weight): %.0f us (1 thread), "
      "%.0f us (2 threads)\n",
      mx::LastLevelCacheBytes() / 1e6, mx::StreamBytes() / 1e6, mx::g_bw1, mx::g_bw2,
      2048 * 6144 * 17.0 / 32 / mx::g_bw1 * 1e-3, 2048 * 6144 * 17.0 / 32 / mx::g_bw2 * 1e-3);
  std::fflush(stdout);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
