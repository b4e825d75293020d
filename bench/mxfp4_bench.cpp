// MXFP4 × activation GEMV/GEMM against the bf16 GEMM at expert-sized shapes (GLM-5:
// hidden 6144, moe_intermediate 2048), one thread, per kernel level. Counters: weight bytes
// read per second (weights_GBps) and multiply-adds per second; the ratio mxfp4 / bf16 at the
// same level and shape is the figure of merit (docs: issue 7).
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <tuple>
#include <vector>

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

const Weights& Get(int64_t m, int64_t n, int64_t k) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, Weights> cache;
  Weights& w = cache[{m, n, k}];
  if (w.q.empty()) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> byte(0, 255), ex(120, 130);
    std::normal_distribution<float> nd;
    w.q.resize(n * k / 2);
    for (auto& v : w.q) v = uint8_t(byte(rng));
    w.e.resize(n * k / 32);
    for (auto& v : w.e) v = uint8_t(ex(rng));
    w.bf16.resize(n * k);
    for (auto& v : w.bf16) v = F32ToBf16(nd(rng));
    w.x.resize(m * k);
    for (auto& v : w.x) v = nd(rng);
  }
  return w;
}

void Run(benchmark::State& st, KernelLevel level, bool mxfp4) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const KernelTable* kt = GetKernelTable(level);
  if (kt == nullptr) {
    st.SkipWithError("level not available");
    return;
  }
  const Weights& w = Get(m, n, k);
  ThreadPool pool(1);
  std::vector<float> y(m * n);
  for (auto _ : st) {
    if (mxfp4) {
      GemmMxfp4(*kt, pool, w.x.data(), m, k, w.q.data(), w.e.data(), n, y.data());
    } else {
      GemmBf16(*kt, pool, w.x.data(), m, k, w.bf16.data(), n, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = mxfp4 ? n * k * 17.0 / 32 : n * k * 2.0;
  st.counters["weights_GBps"] =
      benchmark::Counter(bytes * 1e-9 * st.iterations(), benchmark::Counter::kIsRate);
  st.counters["GMAC/s"] =
      benchmark::Counter(1e-9 * m * n * k * st.iterations(), benchmark::Counter::kIsRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 8, 32}) {
    b->Args({m, 2048, 6144});  // gate/up
    b->Args({m, 6144, 2048});  // down
  }
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(Run, mxfp4_ref, KernelLevel::kRef, true)
    ->Args({1, 2048, 6144})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Run, mxfp4_avx2, KernelLevel::kAvx2, true)->Apply(Shapes);
BENCHMARK_CAPTURE(Run, mxfp4_avx512, KernelLevel::kAvx512, true)->Apply(Shapes);
BENCHMARK_CAPTURE(Run, bf16_avx2, KernelLevel::kAvx2, false)->Apply(Shapes);

}  // namespace
}  // namespace mx

BENCHMARK_MAIN();
