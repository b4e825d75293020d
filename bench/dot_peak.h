// The machine's dot-product ceilings: register-only loops of vdpbf16ps and vpdpbusd
// (gemm_peak.cpp, compiled with the AVX-512 BF16 / VNNI flags: call only where the CPU has
// them, base/cpu_features.h) run on every pool thread at once. gemm_bench and model_bench state
// their GEMM rates and prefills as a share of these, measured in the same run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "bench_util.h"

namespace mx::bench {

// FLOPs (OPs) one thread performed in `iters` iterations of 12 independent vdpbf16ps (vpdpbusd).
double Bf16DotLoop(int64_t iters);
double Int8DotLoop(int64_t iters);

// Best G(FL)OP/s of `reps` runs of loop() on every pool thread at once.
inline double DotPeak(ThreadPool& pool, double (*loop)(int64_t), int reps) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<double> ops(pool.size());
    const double t0 = Now();
    pool.parallel_for(0, pool.size(), [&](int64_t lo, int64_t hi, int) {
      for (int64_t i = lo; i < hi; ++i) ops[i] = loop(2'000'000);
    });
    const double dt = Now() - t0;
    double total = 0;
    for (double o : ops) total += o;
    best = std::max(best, total / dt / 1e9);
  }
  return best;
}

}  // namespace mx::bench
