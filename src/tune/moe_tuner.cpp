// The MoE kernel tuner (see moe_tuner.h).
#include "tune/moe_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "base/bandwidth.h"
#include "base/numerics.h"
#include "kernels/fp8.h"
#include "kernels/mxfp4.h"
#include "model/moe.h"
#include "model/weight_format.h"

namespace mx::tune {

namespace {

using Clock = std::chrono::steady_clock;

// splitmix64: fast, seedable, good enough for synthetic weights.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  float Normal() {                                                            // Box-Muller
    const double u = std::max(Uniform(), 1e-300), v = Uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v));
  }
};

int64_t ExpertBytes(const MoeShape& s, const std::string& dtype) {
  const int64_t params = 3 * s.model_dim * s.moe_inter;
  if (dtype == "mxfp4") return params / 2 + params / 32;
  if (dtype == "fp8") return params + params / (kFp8Block * kFp8Block) * 4;
  return dtype == "bf16" ? params * 2 : params * 4;
}

// W [n, k] with variance ≈ 1/k: bf16 uniform in ±sqrt(3/k); MXFP4 with random codes and the
// per-matrix E8M0 exponent that gives that variance (random codes have rms ≈ 2.9) ± 1; FP8 with
// random e4m3 codes of magnitude [0.5, 8) (rms ≈ 3.7) and each 128 × 128 block's scale
// 1 / (3.7 sqrt(k)) times a random factor in [0.75, 1.25), packed as the loader packs them.
LinearWeight RandomWeight(const std::string& dtype, int64_t n, int64_t k, Rng& rng) {
  LinearWeight w;
  w.n = n;
  w.k = k;
  if (dtype == "mxfp4") {
    w.dtype = DType::kU8;
    w.owned_mx_q.resize(Mxfp4PackedCodeBytes(n, k));
    for (size_t i = 0; i < w.owned_mx_q.size(); i += 8) {
      const uint64_t r = rng.Next();
      for (size_t b = 0; b < 8 && i + b < w.owned_mx_q.size(); ++b) {
        w.owned_mx_q[i + b] = static_cast<uint8_t>(r >> (8 * b));
      }
    }
    const int base = static_cast<int>(std::lround(127 - std::log2(2.9 * std::sqrt(double(k)))));
    w.owned_mx_e.resize(Mxfp4PackedScaleBytes(n, k));
    for (auto& e : w.owned_mx_e)
      e = static_cast<uint8_t>(base - 1 + static_cast<int>(rng.Next() % 3));
    w.mx_q = w.owned_mx_q.data();
    w.mx_e = w.owned_mx_e.data();
    return w;
  }
  if (dtype == "fp8") {
    w.dtype = DType::kF8_E4M3;
    w.owned_mx_q.resize(n * k);  // LinearWeight keeps copied FP8 codes there
    for (auto& c : w.owned_mx_q) {
      const uint64_t r = rng.Next();  // sign, exponent field 6..9 (2^-1..2^2), mantissa
      c = static_cast<uint8_t>((r & 0x80) | ((6 + (r >> 8) % 4) << 3) | ((r >> 16) & 7));
    }
    const int64_t kb = Fp8ScaleCols(k), nb = (n + kFp8Block - 1) / kFp8Block;
    const double base = 1.0 / (3.7 * std::sqrt(double(k)));
    w.owned_fp8_s.resize(nb * kb);
    for (auto& v : w.owned_fp8_s) v = static_cast<float>(base * (0.75 + 0.5 * rng.Uniform()));
    w.fp8 = w.owned_mx_q.data();
    w.fp8_s = w.owned_fp8_s.data();
    w.owned_fp8p.resize(Fp8PackedBytes(n, k));
    w.owned_fp8p_s.resize(Fp8PackedScales(n, k));
    PackFp8(w.fp8, k, w.fp8_s, 0, n, k, w.owned_fp8p.data(), w.owned_fp8p_s.data());
    w.fp8p = w.owned_fp8p.data();
    w.fp8p_s = w.owned_fp8p_s.data();
    return w;
  }
  const float a = std::sqrt(3.0f / static_cast<float>(k));
  if (dtype == "bf16") {  // packed, as the loader gives bf16 weights
    std::vector<uint16_t> rows(n * k);
    for (auto& v : rows) v = F32ToBf16(a * static_cast<float>(2 * rng.Uniform() - 1));
    return PackedBf16Weight(rows.data(), k, n, k);
  } else {
    w.dtype = DType::kF32;
    w.owned_f32.resize(n * k);
    for (auto& v : w.owned_f32) v = a * static_cast<float>(2 * rng.Uniform() - 1);
    w.f32 = w.owned_f32.data();
  }
  return w;
}

MlpWeights RandomExpert(const MoeShape& s, const std::string& dtype, Rng& rng) {
  MlpWeights m;
  m.gate_proj = RandomWeight(dtype, s.moe_inter, s.model_dim, rng);
  m.up_proj = RandomWeight(dtype, s.moe_inter, s.model_dim, rng);
  m.down_proj = RandomWeight(dtype, s.model_dim, s.moe_inter, rng);
  return m;
}

MlpWeights View(const MlpWeights& m) {
  MlpWeights v;
  v.gate_proj = m.gate_proj.Rows(0, m.gate_proj.n);
  v.up_proj = m.up_proj.Rows(0, m.up_proj.n);
  v.down_proj = m.down_proj.Rows(0, m.down_proj.n);
  return v;
}

// Token t's k experts (distinct, ascending) and weights: a function of (seed, t) only, so the
// first rows route the same in every bucket and the reference is computed once.
void RouteToken(const MoeShape& s, uint64_t seed, int64_t t, std::vector<ExpertRows>& by_expert) {
  Rng rng{seed * 0x100000001b3ull + static_cast<uint64_t>(t) * 0x9e3779b97f4a7c15ull};
  std::set<int64_t> chosen;
  while (static_cast<int64_t>(chosen.size()) < s.topk) {
    chosen.insert(static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(s.n_experts)));
  }
  std::vector<float> wt;
  float sum = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    wt.push_back(static_cast<float>(0.05 + rng.Uniform()));
    sum += wt.back();
  }
  size_t i = 0;
  for (int64_t e : chosen) {
    by_expert[e].rows.push_back(t);
    by_expert[e].weights.push_back(wt[i++] / sum * 2.5f);
  }
}

// max |a - b| over n, and max |b|.
std::pair<double, double> MaxDiff(const float* a, const float* b, int64_t n) {
  double d = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return {std::numeric_limits<double>::infinity(), 1};
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(double(b[i])));
  }
  return {d, mag};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Rough seconds of one MoE block, for the ETA only: weight bytes of the active experts at
// 15 GB/s plus FLOPs at 50 GFLOP/s.
double EstimateSeconds(const MoeShape& s, const std::string& dtype, int64_t T) {
  const double active = std::min<double>(s.n_experts, double(T) * s.topk) + s.n_shared;
  const double flops = 2.0 * 3 * s.model_dim * s.moe_inter * double(T) * (s.topk + s.n_shared);
  return active * ExpertBytes(s, dtype) / 15e9 + flops / 50e9;
}

}  // namespace

std::vector<MoeKernelConfig> EnumerateMoeCandidates(const MoeShape& shape, const std::string& dtype,
                                                    KernelLevel level, int64_t tokens,
                                                    int threads) {
  std::vector<MoeKernelConfig> out = {DefaultMoeConfig()};
  const bool tiled = level != KernelLevel::kRef;
  // mr 0 is each kernel's default (8 rows for packed bf16 and MXFP4, 4 for f32); list the others
  // explicitly.
  std::vector<int> mrs = {0};
  if (tiled && tokens >= 2) mrs.insert(mrs.end(), {1, 2, 4});
  std::vector<int> nbs = {0};
  if (tiled && tokens >= 2) nbs.push_back(64);
  std::vector<int64_t> tts = {0};
  if (tokens > 64) tts.push_back(64);
  struct SplitFuse {
    MoeSplit split;
    bool fuse;
  };
  std::vector<SplitFuse> sfs = {
      {MoeSplit::kColumns, false}, {MoeSplit::kColumns, true}, {MoeSplit::kBatched, false}};
  if (threads > 1 && shape.n_experts > 1) sfs.push_back({MoeSplit::kExperts, false});
  for (const SplitFuse& sf : sfs) {
    for (int mr : mrs) {
      for (int nb : nbs) {
        for (int64_t tt : tts) {
          MoeKernelConfig c;
          c.split = sf.split;
          c.fuse_gate_up = sf.fuse;
          c.tiling = {.mr = mr, .nb = nb};
          c.token_tile = tt;
          if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
        }
      }
    }
  }
  return out;
}

// FP8 and MXFP4 configs may take their activations in other tiles and orders (bf16 / int8 rounding
// of the same values, sums in another order); bf16 and f32 differ by summation order only.
double CheckTolerance(const std::string& dtype) {
  return dtype == "mxfp4" || dtype == "fp8" ? 2e-2 : 1e-4;
}

namespace {

Status CheckOptions(const MoeTuneOptions& o) {
  const MoeShape& s = o.shape;
  if (o.dtype != "bf16" && o.dtype != "mxfp4" && o.dtype != "fp8" && o.dtype != "f32") {
    return InvalidArgument("--dtype {}: expected mxfp4, fp8 or bf16", o.dtype);
  }
  if (o.dtype == "mxfp4" && (s.model_dim % 32 != 0 || s.moe_inter % 32 != 0)) {
    return InvalidArgument("--shape {}: MXFP4 needs model_dim and moe_inter divisible by 32",
                           MoeShapeSpec(s));
  }
  if (o.tokens.empty()) return InvalidArgument("--tokens: give at least one bucket");
  for (size_t i = 0; i < o.tokens.size(); ++i) {
    if (o.tokens[i] < 1 || (i > 0 && o.tokens[i] <= o.tokens[i - 1])) {
      return InvalidArgument("--tokens: buckets must be >= 1 and strictly ascending");
    }
  }
  if (o.warmup < 0 || o.repeats < 1) {
    return InvalidArgument("--warmup must be >= 0 and --repeats >= 1");
  }
  return Status::Ok();
}

// How many experts' weights the tune allocates (the representative subset, moe_tuner.h).
Result<int64_t> SubsetSize(const MoeTuneOptions& o) {
  const MoeShape& s = o.shape;
  const int64_t per = ExpertBytes(s, o.dtype);
  const int64_t budget = o.max_expert_bytes - s.n_shared * per;
  const int64_t S = std::min<int64_t>(s.n_experts, budget > 0 ? budget / per : 0);
  if (S < std::min<int64_t>(s.n_experts, s.topk + 1)) {
    return InvalidArgument(
        "--max-expert-gib: {:.2f} GiB holds {} expert(s) of {:.1f} MiB (+ {} shared); the "
        "subset needs at least {}",
        o.max_expert_bytes / double(1 << 30), std::max<int64_t>(S, 0), per / double(1 << 20),
        s.n_shared, std::min<int64_t>(s.n_experts, s.topk + 1));
  }
  return S;
}

// The synthetic MoE a tune runs: S physical experts behind E routed views (e → e mod S), the
// shared expert, activations for the largest bucket, and the scalar reference's output for the
// first check rows (default config).
struct Bench {
  std::vector<MlpWeights> physical;
  MoeWeights w;
  std::vector<float> x;        // [T_max, D]
  int64_t check_rows = 0;      // Rc
  std::vector<float> ref_out;  // [Rc, D]
};

void MakeBench(const MoeTuneOptions& o, int64_t S, GemmActivations activations, ThreadPool& pool,
               Bench& b) {
  const MoeShape& s = o.shape;
  Rng rng{o.seed};
  b.physical.reserve(S);
  for (int64_t e = 0; e < S; ++e) b.physical.push_back(RandomExpert(s, o.dtype, rng));
  b.w.experts.reserve(s.n_experts);
  for (int64_t e = 0; e < s.n_experts; ++e) b.w.experts.push_back(View(b.physical[e % S]));
  b.w.has_shared = s.n_shared > 0;
  if (b.w.has_shared) {
    // n_shared experts act as one of width n_shared · F (how HF stores shared_experts).
    MoeShape sh = s;
    sh.moe_inter = s.moe_inter * s.n_shared;
    b.w.shared_experts = RandomExpert(sh, o.dtype, rng);
  }
  b.x.resize(o.tokens.back() * s.model_dim);
  for (auto& v : b.x) v = rng.Normal();
  b.check_rows = std::min(o.check_rows, o.tokens.front());
  std::vector<ExpertRows> ref_routes(s.n_experts);
  for (int64_t t = 0; t < b.check_rows; ++t) RouteToken(s, o.seed, t, ref_routes);
  b.ref_out.resize(b.check_rows * s.model_dim);
  // The scalar kernels take activations as the tuned table does.
  MoeExperts(WithGemmActivations(*GetKernelTable(KernelLevel::kRef), activations), pool, b.w,
             b.x.data(), b.check_rows, ref_routes, DefaultMoeConfig(), b.ref_out.data());
}

double WallClockUs(const std::function<void()>& run) {
  const auto a = Clock::now();
  run();
  return std::chrono::duration<double, std::micro>(Clock::now() - a).count();
}

}  // namespace

Result<MoeTuneTable> TuneMoe(const MoeTuneOptions& o, const KernelTable& kt, ThreadPool& pool,
                             const std::function<void(const MoeTuneProgress&)>& progress) {
  MX_RETURN_IF_ERROR(CheckOptions(o));
  MX_ASSIGN_OR_RETURN(const int64_t S, SubsetSize(o));
  const MoeShape& s = o.shape;
  Bench bench;
  MakeBench(o, S, kt.bf16_activations, pool, bench);
  const double tol = CheckTolerance(o.dtype);
  std::vector<std::vector<MoeKernelConfig>> cands;
  double total_est = 0;
  for (int64_t T : o.tokens) {
    cands.push_back(EnumerateMoeCandidates(s, o.dtype, kt.level, T, pool.size()));
    total_est += EstimateSeconds(s, o.dtype, T) * cands.back().size() * (o.warmup + o.repeats + 1);
  }

  MoeTuneTable table;
  table.dtype = o.dtype;
  table.isa = KernelLevelName(kt.level);
  table.shape = s;
  table.threads = pool.size();
  table.experts_allocated = S;
  table.command = o.command;
  CacheFlusher flush(pool, o.flush_caches && !o.time_us ? static_cast<size_t>(StreamBytes()) : 0);
  const auto t0 = Clock::now();
  double done_est = 0;
  for (size_t bi = 0; bi < o.tokens.size(); ++bi) {
    const int64_t T = o.tokens[bi];
    std::vector<ExpertRows> routes(s.n_experts);
    for (int64_t t = 0; t < T; ++t) RouteToken(s, o.seed, t, routes);
    std::vector<float> base(T * s.model_dim), out(T * s.model_dim);
    MoeTuneBucket b;
    b.tokens = T;
    b.candidates = static_cast<int64_t>(cands[bi].size());
    b.best_us = std::numeric_limits<double>::infinity();
    const double est = EstimateSeconds(s, o.dtype, T) * (o.warmup + o.repeats + 1);
    for (size_t ci = 0; ci < cands[bi].size(); ++ci) {
      const MoeKernelConfig& c = cands[bi][ci];
      float* y = ci == 0 ? base.data() : out.data();
      auto run = [&] { MoeExperts(kt, pool, bench.w, bench.x.data(), T, routes, c, y); };
      run();  // the check run (also a warm-up)
      const int64_t Rc = bench.check_rows;
      auto [dr, mr] = MaxDiff(y, bench.ref_out.data(), Rc * s.model_dim);
      auto [db, mb] = MaxDiff(y, base.data(), T * s.model_dim);
      if (!(dr <= tol * std::max(mr, 1e-30)) || !(db <= tol * std::max(mb, 1e-30))) {
        return Internal(
            "tokens={} candidate {}: output differs from the reference (max |diff| {:.3g} vs "
            "ref max {:.3g} on the first {} rows; {:.3g} vs the default's max {:.3g}); allowed "
            "{:.0e} of the max",
            T, MoeConfigString(c), dr, mr, Rc, db, mb, tol);
      }
      for (int i = 0; i < o.warmup; ++i) run();
      std::vector<double> us;
      for (int i = 0; i < o.repeats; ++i) {
        flush();
        us.push_back(o.time_us ? o.time_us(c, T, run) : WallClockUs(run));
      }
      const double med = Median(us);
      if (ci == 0) b.default_us = med;
      if (med < b.best_us) {
        b.best_us = med;
        b.best = c;
      }
      done_est += est;
      if (progress) {
        progress({T, static_cast<int64_t>(ci + 1), b.candidates, done_est / total_est,
                  std::chrono::duration<double>(Clock::now() - t0).count(), MoeConfigString(c),
                  med});
      }
    }
    table.buckets.push_back(b);
  }
  return table;
}

}  // namespace mx::tune
