// The kernel table's non-GEMM entries at every level this CPU has (ref, avx2, avx512), one
// thread, at GLM-5 decode shapes: RMSNorm over hidden 6144, softmax over 4096 scores, RoPE of
// a 64-wide rope part, the indexer's top-2048 of 32768 positions and the router's top-8 of
// 256, SwiGLU over 2048, and one head of absorbed MLA attention (512 latent + 64 rope, values
// = the latent) over 2048 dense positions. The counters are items (elements, positions) per
// second; compare levels within one run (the host is noisy).
//
//   ./build/release/bench/kernels_bench --benchmark_repetitions=3 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/numerics.h"
#include "kernels/kernels.h"

namespace {

std::vector<float> Randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

const mx::KernelTable* Level(const benchmark::State& state) {
  return mx::GetKernelTable(static_cast<mx::KernelLevel>(state.range(0)));
}

#define MX_SKIP_IF_ABSENT(kt)                               \
  if ((kt) == nullptr) {                                    \
    state.SkipWithError("level not available on this CPU"); \
    return;                                                 \
  }

void BM_RmsNorm(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const int64_t n = 6144;
  auto x = Randn(n, 1), w = Randn(n, 2);
  std::vector<float> y(n);
  for (auto _ : state) {
    kt->rms_norm(x.data(), w.data(), 1e-5f, n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_Softmax(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const int64_t n = 4096;
  const auto x = Randn(n, 3, 4.0f);
  std::vector<float> y(n);
  for (auto _ : state) {
    std::copy(x.begin(), x.end(), y.begin());
    kt->softmax(y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_Rope(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const int64_t d = 64, heads = 64;  // one token's rope parts of 64 heads
  auto x = Randn(d * heads, 4), ang = Randn(d / 2, 5);
  std::vector<float> c(d / 2), s(d / 2);
  for (int64_t j = 0; j < d / 2; ++j) c[j] = std::cos(ang[j]), s[j] = std::sin(ang[j]);
  for (auto _ : state) {
    for (int64_t h = 0; h < heads; ++h) kt->rope(x.data() + h * d, d, c.data(), s.data(), true);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * d * heads);
}

void BM_TopK(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const int64_t n = state.range(1), k = state.range(2);
  const auto s = Randn(n, 6);
  std::vector<int32_t> out(k);
  for (auto _ : state) {
    kt->topk(s.data(), n, k, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_SwiGlu(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const int64_t n = 2048;
  auto g = Randn(n, 7, 3.0f), u = Randn(n, 8);
  std::vector<float> y(n);
  for (auto _ : state) {
    kt->swiglu(g.data(), u.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_Attend(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const int64_t da = 512, db = 64, n = 2048, w = da + db;
  const auto cache = Randn(n * w, 9), q = Randn(w, 10);
  std::vector<const float*> ka(n), kb(n);
  for (int64_t t = 0; t < n; ++t) {
    ka[t] = cache.data() + t * w;
    kb[t] = ka[t] + da;
  }
  std::vector<float> scratch(n), out(da);
  const float scale = 1.0f / std::sqrt(static_cast<float>(w));
  for (auto _ : state) {
    kt->attend(q.data(), q.data() + da, da, db, ka.data(), kb.data(), ka.data(), da, n, scale,
               scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

// attend_rows at MLA's two shapes, n = 2048 and 8192 keys: expanded prefill (32 query rows of one
// head, 192 + 64 key, 128 value, key rows strided as the decompressed rows of 16 heads, causal
// limits within the tile) and absorbed decode (16 heads of one query: 512 + 64 key, the 512 latent
// as value). Counter: FLOP/s (2 per multiply-add, every key of every row).
void BM_AttendRows(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  const bool expanded = state.range(1) == 0;
  const int64_t n = state.range(2), m = expanded ? 32 : 16, da = expanded ? 192 : 512, db = 64,
                dv = expanded ? 128 : 512, heads = expanded ? 16 : 1;
  const int64_t row = expanded ? heads * (da + dv) : da + db;
  const auto cache = Randn(n * row, 11, 0.5f), pe = Randn(n * db, 12, 0.5f),
             q = Randn(m * (da + db), 13);
  std::vector<const float*> ka(n), kb(n), v(n);
  for (int64_t t = 0; t < n; ++t) {
    ka[t] = cache.data() + t * row;
    kb[t] = expanded ? pe.data() + t * db : ka[t] + da;
    v[t] = expanded ? ka[t] + da : ka[t];
  }
  std::vector<int64_t> lim(m);
  for (int64_t i = 0; i < m; ++i) lim[i] = expanded ? n - m + i + 1 : n;
  std::vector<float> scratch(mx::AttendRowsScratch(m, dv)), out(m * dv);
  const float scale = 1.0f / std::sqrt(static_cast<float>(da + db));
  for (auto _ : state) {
    kt->attend_rows(q.data(), da + db, q.data() + da, da + db, m, da, db, ka.data(), kb.data(),
                    v.data(), dv, n, lim.data(), nullptr, 0, scale, scratch.data(), out.data(), dv,
                    nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * m * n * (da + db + dv),
                         benchmark::Counter::kIsRate);
}

// attend_rows_bf16 at the absorbed decode shape over a bf16 cache read in place (one query's m
// heads: a worker's 8 of 16 at 2 threads, or all 16; 512 + 64 key, the 512 latent as value).
void BM_AttendRowsBf16(benchmark::State& state) {
  const mx::KernelTable* kt = Level(state);
  MX_SKIP_IF_ABSENT(kt);
  // spread 16: the rows DSA selected, every 16th of a cache too large for the caches; cold 1: the
  // caches flushed before each call (untimed), so the rows come from memory as in a decode step,
  // whose weights stream through the caches between two layers' attention.
  const int64_t m = state.range(1), n = state.range(2), spread = state.range(3), da = 512, db = 64,
                dv = 512;
  const bool cold = state.range(4) != 0;
  std::vector<uint8_t> flush(cold ? 128 << 20 : 0, 1);
  uint64_t sink = 0;
  const auto cache = Randn(n * spread * (da + db), 11, 0.5f), q = Randn(m * (da + db), 13);
  std::vector<uint16_t> c16(cache.size());
  for (size_t i = 0; i < cache.size(); ++i) c16[i] = mx::F32ToBf16(cache[i]);
  std::vector<const uint16_t*> ka(n), kb(n);
  for (int64_t t = 0; t < n; ++t) ka[t] = c16.data() + t * spread * (da + db), kb[t] = ka[t] + da;
  std::vector<float> scratch(mx::AttendRowsScratch(m, dv)), out(m * dv);
  const float scale = 1.0f / std::sqrt(static_cast<float>(da + db));
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      for (size_t i = 0; i < flush.size(); i += 64) sink += flush[i]++;
      state.ResumeTiming();
    }
    kt->attend_rows_bf16(q.data(), da + db, q.data() + da, da + db, m, da, db, ka.data(), kb.data(),
                         ka.data(), dv, n, nullptr, nullptr, 0, scale, scratch.data(), out.data(),
                         dv, nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  benchmark::DoNotOptimize(sink);
  state.counters["FLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * m * n * (da + db + dv),
                         benchmark::Counter::kIsRate);
}

void Levels(benchmark::internal::Benchmark* b) {
  b->ArgName("level");
  for (int l = 0; l <= 2; ++l) b->Arg(l);
}

BENCHMARK(BM_RmsNorm)->Apply(Levels);
BENCHMARK(BM_Softmax)->Apply(Levels);
BENCHMARK(BM_Rope)->Apply(Levels);
BENCHMARK(BM_SwiGlu)->Apply(Levels);
BENCHMARK(BM_Attend)->Apply(Levels);
BENCHMARK(BM_AttendRows)
    ->ArgNames({"level", "absorbed", "n"})
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {2048, 8192}});
BENCHMARK(BM_AttendRowsBf16)
    ->ArgNames({"level", "m", "n", "spread", "cold"})
    ->ArgsProduct({{1, 2}, {8, 16}, {2048}, {1, 16}, {0, 1}});
BENCHMARK(BM_TopK)
    ->ArgNames({"level", "n", "k"})
    ->Args({0, 32768, 2048})
    ->Args({1, 32768, 2048})
    ->Args({2, 32768, 2048})
    ->Args({0, 256, 8})
    ->Args({1, 256, 8})
    ->Args({2, 256, 8});

}  // namespace

BENCHMARK_MAIN();
