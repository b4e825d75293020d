// FP8 block-scaled GEMV and GEMM against the machine's floors: the decode GEMV (m = 1, weights
// streamed from memory: several copies of W, cycled so none is cached) as achieved GB/s of
// weight bytes (1 per weight + 4 per 128×128 block) against the read-bandwidth probe
// (base/bandwidth.h), and the prefill GEMM as GFLOP/s against the bf16 GEMM the loaded bf16
// weights run (packed, kernels/bf16_packed.h; activations exact, GemmActivations::kFp32, the FP8
// kernel's precision) on the same shape. Best and median of
// `reps`. The host is shared: run nothing else meanwhile.
//
//   fp8_bench [threads=0 (all)] [reps=7] [m=128,512] [shapes=2048x2048,768x2048,2048x768]
//             [mr=0] [nb=0] (the GemmTiling of the FP8 and bf16 GEMMs; 0 = the defaults)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/bandwidth.h"
#include "base/numerics.h"
#include "base/thread_pool.h"
#include "kernels/bf16_packed.h"
#include "kernels/fp8.h"
#include "kernels/kernels.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stats {
  double best, median;
};

template <typename Fn>
Stats Time(int reps, Fn fn) {
  fn(0);  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    fn(r + 1);
    t.push_back(Now() - t0);
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"threads", "0"}, {"reps", "7"}, {"m", "128,512"}, {"shapes", "2048x2048,768x2048,2048x768"},
      {"mr", "0"},      {"nb", "0"}};
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t eq = s.find('=');
    if (eq == std::string::npos || !a.count(s.substr(0, eq))) {
      fmt::print(stderr, "fp8_bench: unknown argument '{}'\n", s);
      return 1;
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  mx::ThreadPool pool(std::stoi(a["threads"]));
  const int reps = std::stoi(a["reps"]);
  const mx::KernelTable& kt = mx::SelectKernels();
  const mx::GemmTiling tiling{.mr = std::stoi(a["mr"]), .nb = std::stoi(a["nb"])};
  const double floor_gbps = mx::MeasureReadBandwidthGBps(pool);
  fmt::print("{} threads, kernels {}; read bandwidth floor {:.1f} GB/s\n\n", pool.size(),
             mx::KernelLevelName(kt.level), floor_gbps);
  fmt::print("| kernel | m | n | k | GB/s or GFLOP/s best | median | vs floor / bf16 best |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::stringstream shapes(a["shapes"]);
  for (std::string sh; std::getline(shapes, sh, ',');) {
    const size_t xpos = sh.find('x');
    const int64_t n = std::stoll(sh.substr(0, xpos)), k = std::stoll(sh.substr(xpos + 1));
    const int64_t ns = mx::Fp8ScaleCols(n) * mx::Fp8ScaleCols(k);
    const double bytes = double(n * k) + 4.0 * ns;
    // Enough copies that the cycled set exceeds the caches.
    const int64_t copies = std::max<int64_t>(2, mx::StreamBytes() / (n * k) + 1);
    std::vector<uint8_t> w(copies * n * k);
    for (auto& b : w) {
      do b = static_cast<uint8_t>(rng());
      while ((b & 0x7f) == 0x7f || (b & 0x78) > 0x48);  // no NaN codes, |v| <= 2^2
    }
    std::vector<float> s(copies * ns);
    for (auto& v : s) v = 0.01f * (1.0f + 0.1f * nd(rng));
    std::vector<float> x(k), y(n);
    for (auto& v : x) v = nd(rng);
    const Stats g = Time(reps, [&](int r) {
      const int64_t c = r % copies;
      mx::GemmFp8(kt, pool, x.data(), 1, k, w.data() + c * n * k, s.data() + c * ns, 0, n,
                  y.data());
    });
    fmt::print("| FP8 GEMV, streamed | 1 | {} | {} | {:.1f} | {:.1f} | {:.0f}% of floor |\n", n, k,
               bytes / g.best / 1e9, bytes / g.median / 1e9,
               100 * bytes / g.best / 1e9 / floor_gbps);
    std::vector<uint16_t> wb(n * k), wp(mx::Bf16PackedElems(n, k));
    for (int64_t i = 0; i < n * k; ++i) {
      wb[i] = mx::F32ToBf16(mx::Fp8E4M3FnToF32(w[i]) * s[i / k / 128 * mx::Fp8ScaleCols(k)]);
    }
    mx::PackBf16(wb.data(), k, n, k, wp.data());
    for (int64_t m : [&] {
           std::vector<int64_t> v;
           std::stringstream ss(a["m"]);
           for (std::string t; std::getline(ss, t, ',');) v.push_back(std::stoll(t));
           return v;
         }()) {
      std::vector<float> xm(m * k), ym(m * n);
      for (auto& v : xm) v = nd(rng);
      const double flops = 2.0 * m * n * k;
      const Stats f = Time(reps, [&](int) {
        mx::GemmFp8(kt, pool, xm.data(), m, k, w.data(), s.data(), 0, n, ym.data(), tiling);
      });
      const Stats b = Time(reps, [&](int) {
        mx::GemmBf16Packed(kt, pool, xm.data(), m, k, wp.data(), n, ym.data(), tiling);
      });
      fmt::print("| FP8 GEMM | {} | {} | {} | {:.0f} | {:.0f} | {:.0f}% of bf16 |\n", m, n, k,
                 flops / f.best / 1e9, flops / f.median / 1e9, 100 * b.best / f.best);
      fmt::print("| bf16 packed GEMM (fp32 activations) | {} | {} | {} | {:.0f} | {:.0f} | |\n", m,
                 n, k, flops / b.best / 1e9, flops / b.median / 1e9);
    }
  }
  return 0;
}
