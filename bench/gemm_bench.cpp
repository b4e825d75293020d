// Prefill GEMM rates against the machine's ceilings: the threaded bf16 GEMM with activations
// taken exactly (GemmActivations::kFp32, three vdpbf16ps per product) and rounded to bf16 (kBf16,
// one), and the MXFP4 GEMM (int8 activations, vpdpbusd), at the bench-scale prefill shapes (m
// rows of activations × the attention / expert weights), against register-only loops of the
// same instructions on the same threads (gemm_peak.cpp). Best and median of `reps`; weights
// random, activations N(0, 1). The host is shared: run nothing else meanwhile.
//
//   gemm_bench [threads=0 (all)] [reps=7] [m=128,512] [shapes=2048x2048,768x2048,2048x768]
//              [mr=0] [nb=0] [kc=0] (the GemmTiling of every GEMM; 0 = the kernels' defaults;
//              kc=1000000: the packed bf16 GEMM without K blocks)
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/numerics.h"
#include "base/thread_pool.h"
#include "bench_util.h"
#include "dot_peak.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"

namespace {

using mx::bench::Ints;
using mx::bench::Stats;
using mx::bench::Time;

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"threads", "0"}, {"reps", "7"}, {"m", "128,512"}, {"shapes", "2048x2048,768x2048,2048x768"},
      {"nb", "0"},      {"mr", "0"},   {"kc", "0"}};
  if (!mx::bench::ParseArgs(argc, argv, "gemm_bench", a)) return 1;
  const mx::CpuFeatures& f = mx::GetCpuFeatures();
  if (!(f.avx512_core() && f.avx512bf16 && f.avx512vnni)) {
    fmt::print(stderr, "gemm_bench: needs AVX-512 BF16 and VNNI\n");
    return 1;
  }
  mx::ThreadPool pool(std::stoi(a["threads"]));
  const int reps = std::stoi(a["reps"]);
  const mx::KernelTable& exact = mx::SelectKernels();
  const mx::KernelTable& x16 = mx::WithGemmActivations(exact, mx::GemmActivations::kBf16);
  const mx::GemmTiling tiling{
      .mr = std::stoi(a["mr"]), .nb = std::stoi(a["nb"]), .kc = std::stoi(a["kc"])};
  const double bf16_peak = mx::bench::DotPeak(pool, mx::bench::Bf16DotLoop, 5);
  const double int8_peak = mx::bench::DotPeak(pool, mx::bench::Int8DotLoop, 5);
  fmt::print(
      "{} threads, kernels {}; ceilings (register-only loops): vdpbf16ps {:.0f} GFLOP/s, "
      "vpdpbusd {:.0f} GOP/s\n\n",
      pool.size(), mx::KernelLevelName(exact.level), bf16_peak, int8_peak);
  fmt::print("| GEMM | m | n | k | GFLOP/s best | median | % of vdpbf16ps ceiling |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const auto& shape : mx::bench::Shapes(a["shapes"])) {
    const int64_t n = shape.first, k = shape.second;  // named: lambdas below capture them
    std::vector<uint16_t> wb(n * k);
    for (auto& w : wb) w = mx::F32ToBf16(0.02f * nd(rng));
    std::vector<uint16_t> wp(mx::Bf16PackedElems(n, k));
    mx::PackBf16(wb.data(), k, n, k, wp.data());
    std::vector<uint8_t> wq(mx::Mxfp4PackedCodeBytes(n, k)), we(mx::Mxfp4PackedScaleBytes(n, k));
    for (auto& q : wq) q = static_cast<uint8_t>(rng());
    for (auto& e : we) e = static_cast<uint8_t>(118 + rng() % 8);
    for (int64_t m : Ints(a["m"])) {
      std::vector<float> x(m * k), y(m * n);
      for (auto& v : x) v = nd(rng);
      const double flops = 2.0 * m * n * k;
      auto row = [&](const char* name, Stats s) {
        fmt::print("| {} | {} | {} | {} | {:.0f} | {:.0f} | {:.0f}% |\n", name, m, n, k,
                   flops / s.best / 1e9, flops / s.median / 1e9,
                   100 * flops / s.best / 1e9 / bf16_peak);
      };
      row("bf16, fp32 activations (3 parts)", Time(reps, [&](int) {
            mx::GemmBf16(exact, pool, x.data(), m, k, wb.data(), n, y.data(), tiling);
          }));
      row("bf16, bf16 activations", Time(reps, [&](int) {
            mx::GemmBf16(x16, pool, x.data(), m, k, wb.data(), n, y.data(), tiling);
          }));
      row("bf16 packed, fp32 activations (3 parts)", Time(reps, [&](int) {
            mx::GemmBf16Packed(exact, pool, x.data(), m, k, wp.data(), n, y.data(), tiling);
          }));
      row("bf16 packed, bf16 activations", Time(reps, [&](int) {
            mx::GemmBf16Packed(x16, pool, x.data(), m, k, wp.data(), n, y.data(), tiling);
          }));
      row("MXFP4, int8 activations", Time(reps, [&](int) {
            mx::GemmMxfp4(exact, pool, x.data(), m, k, wq.data(), we.data(), n, y.data(), tiling);
          }));
    }
  }
  return 0;
}
