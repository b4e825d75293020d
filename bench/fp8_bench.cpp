// FP8 block-scaled GEMV and GEMM against the machine's floors, over the packed FP8 weights the
// loader makes (kernels/fp8.h): the decode GEMV (m = 1 and a few rows, weights streamed from
// memory: several copies of W, cycled so none is cached) as achieved GB/s of the checkpoint's
// weight bytes (1 per weight + 4 per 128×128 block) against the read-bandwidth probe
// (base/bandwidth.h), and the prefill GEMM as GFLOP/s against the packed bf16 GEMM the loaded
// bf16 weights run (kernels/bf16_packed.h) on the same shape, with activations taken exactly
// (GemmActivations::kFp32, three vdpbf16ps per product) and rounded to bf16 (kBf16, one).
// Best and median of `reps`. The host is shared: run nothing else meanwhile.
//
//   fp8_bench [threads=0 (all)] [reps=7] [gemv_m=1,4] [m=128,512]
//             [shapes=2048x2048,768x2048,2048x768]
//             [mr=0] [nb=0] (the GemmTiling of the FP8 and bf16 GEMMs; 0 = the defaults)
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/bandwidth.h"
#include "base/numerics.h"
#include "base/thread_pool.h"
#include "bench_util.h"
#include "kernels/bf16_packed.h"
#include "kernels/fp8.h"
#include "kernels/kernels.h"

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"threads", "0"},
                                          {"reps", "7"},
                                          {"gemv_m", "1,4"},
                                          {"m", "128,512"},
                                          {"shapes", "2048x2048,768x2048,2048x768"},
                                          {"mr", "0"},
                                          {"nb", "0"}};
  if (!mx::bench::ParseArgs(argc, argv, "fp8_bench", a)) return 1;
  using mx::bench::Stats;
  using mx::bench::Time;
  mx::ThreadPool pool(std::stoi(a["threads"]));
  const int reps = std::stoi(a["reps"]);
  const mx::KernelTable& exact = mx::SelectKernels();
  const mx::KernelTable& x16 = mx::WithGemmActivations(exact, mx::GemmActivations::kBf16);
  const mx::GemmTiling tiling{.mr = std::stoi(a["mr"]), .nb = std::stoi(a["nb"])};
  const double floor_gbps = mx::MeasureReadBandwidthGBps(pool);
  fmt::print("{} threads, kernels {}; read bandwidth floor {:.1f} GB/s\n\n", pool.size(),
             mx::KernelLevelName(exact.level), floor_gbps);
  fmt::print(
      "| kernel | activations | m | n | k | GB/s or GFLOP/s best | median | vs floor / bf16 |\n");
  fmt::print("|---|---|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::pair<const mx::KernelTable*, const char*> modes[] = {{&exact, "fp32 (3 parts)"},
                                                                  {&x16, "bf16"}};
  for (const auto& [n, k] : mx::bench::Shapes(a["shapes"])) {
    const int64_t kb = mx::Fp8ScaleCols(k), ns = mx::Fp8ScaleCols(n) * kb;
    const double bytes = double(n * k) + 4.0 * ns;
    const int64_t pb = mx::Fp8PackedBytes(n, k), ps = mx::Fp8PackedScales(n, k);
    // Enough copies that the cycled set exceeds the caches.
    const int64_t copies = std::max<int64_t>(2, mx::StreamBytes() / (n * k) + 1);
    std::vector<uint8_t> w(n * k), wp(copies * pb);
    std::vector<float> s(ns), sp(copies * ps);
    std::vector<uint16_t> wb(n * k), wbp(mx::Bf16PackedElems(n, k));
    for (int64_t c = 0; c < copies; ++c) {
      for (auto& b : w) {
        do b = static_cast<uint8_t>(rng());
        while ((b & 0x7f) == 0x7f || (b & 0x78) > 0x48);  // no NaN codes, |v| <= 2^2
      }
      for (auto& v : s) v = 0.01f * (1.0f + 0.1f * nd(rng));
      mx::PackFp8(w.data(), k, s.data(), 0, n, k, wp.data() + c * pb, sp.data() + c * ps);
    }
    for (int64_t i = 0; i < n * k; ++i) {  // the last copy, dequantized, for the bf16 GEMM
      wb[i] = mx::F32ToBf16(mx::Fp8E4M3FnToF32(w[i]) * s[i / k / 128 * kb + i % k / 128]);
    }
    mx::PackBf16(wb.data(), k, n, k, wbp.data());
    for (const auto& [kt, mode] : modes) {
      for (int64_t m : mx::bench::Ints(a["gemv_m"])) {
        std::vector<float> x(m * k), y(m * n);
        for (auto& v : x) v = nd(rng);
        auto gemv = [&](int r) {
          const int64_t c = r % copies;
          mx::GemmFp8(*kt, pool, x.data(), m, k, wp.data() + c * pb, sp.data() + c * ps, n,
                      y.data());
        };
        // Steady state, as decode reads the same weights every step: the first pass of the
        // pool's threads over freshly written copies read 2-4x slower (on this VM, whatever m
        // or activations came first), so one untimed series over the copies the timed series
        // uses, then a read of every copy to evict them from the caches.
        Time(reps, gemv);
        volatile uint64_t sink = mx::SumBytes(wp.data(), static_cast<int64_t>(wp.size()), true);
        (void)sink;
        const Stats g = Time(reps, gemv);
        fmt::print(
            "| FP8 GEMV, streamed | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.0f}% of floor |\n",
            mode, m, n, k, bytes / g.best / 1e9, bytes / g.median / 1e9,
            100 * bytes / g.best / 1e9 / floor_gbps);
      }
      for (int64_t m : mx::bench::Ints(a["m"])) {
        std::vector<float> x(m * k), y(m * n);
        for (auto& v : x) v = nd(rng);
        const double flops = 2.0 * m * n * k;
        const int64_t c = copies - 1;
        const Stats f = Time(reps, [&](int) {
          mx::GemmFp8(*kt, pool, x.data(), m, k, wp.data() + c * pb, sp.data() + c * ps, n,
                      y.data(), tiling);
        });
        const Stats b = Time(reps, [&](int) {
          mx::GemmBf16Packed(*kt, pool, x.data(), m, k, wbp.data(), n, y.data(), tiling);
        });
        fmt::print("| FP8 GEMM | {} | {} | {} | {} | {:.0f} | {:.0f} | {:.0f}% of bf16 |\n", mode,
                   m, n, k, flops / f.best / 1e9, flops / f.median / 1e9, 100 * b.best / f.best);
        fmt::print("| bf16 packed GEMM | {} | {} | {} | {} | {:.0f} | {:.0f} | |\n", mode, m, n, k,
                   flops / b.best / 1e9, flops / b.median / 1e9);
      }
    }
  }
  return 0;
}
