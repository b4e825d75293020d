// MoeExperts under every config kind (split × fuse × tiling × token tile) gives exactly the
// default's output, for bf16, f32 and MXFP4 experts, with a shared expert twice as wide, on
// every compiled kernel level (also MXFP4 routed experts beside a bf16 shared one); and the default
// matches a float64 loop over the dequantized weights (the routed sum the MoE block defines).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/numerics.h"
#include "kernels/mxfp4.h"
#include "model/moe.h"
#include "model/weight_format.h"

namespace mx {
namespace {

constexpr int64_t D = 64, F = 32, E = 5, T = 11;

LinearWeight Random(const std::string& dtype, int64_t n, int64_t k, std::mt19937& rng) {
  LinearWeight w;
  w.n = n;
  w.k = k;
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  if (dtype == "mxfp4") {
    w.dtype = DType::kU8;
    std::uniform_int_distribution<int> byte(0, 255), ex(121, 124);
    w.owned_mx_q.resize(Mxfp4PackedCodeBytes(n, k));
    for (auto& v : w.owned_mx_q) v = static_cast<uint8_t>(byte(rng));
    w.owned_mx_e.resize(Mxfp4PackedScaleBytes(n, k));
    for (auto& v : w.owned_mx_e) v = static_cast<uint8_t>(ex(rng));
    w.mx_q = w.owned_mx_q.data();
    w.mx_e = w.owned_mx_e.data();
  } else if (dtype == "bf16") {  // packed, as the loader gives bf16 weights
    std::vector<uint16_t> rows(n * k);
    for (auto& v : rows) v = F32ToBf16(u(rng));
    return PackedBf16Weight(rows.data(), k, n, k);
  } else {
    w.dtype = DType::kF32;
    w.owned_f32.resize(n * k);
    for (auto& v : w.owned_f32) v = u(rng);
    w.f32 = w.owned_f32.data();
  }
  return w;
}

MlpWeights Expert(const std::string& dtype, int64_t f, std::mt19937& rng) {
  MlpWeights m;
  m.gate_proj = Random(dtype, f, D, rng);
  m.up_proj = Random(dtype, f, D, rng);
  m.down_proj = Random(dtype, D, f, rng);
  return m;
}

struct MoeCase {
  MoeWeights w;
  std::vector<float> x;  // [T, D]
  std::vector<ExpertRows> routes;
};

// "mxfp4+bf16": MXFP4 routed experts with a bf16 shared expert (the default quantize recipe).
MoeCase Make(const std::string& dtype) {
  std::mt19937 rng(42);
  MoeCase s;
  const std::string routed = dtype == "mxfp4+bf16" ? "mxfp4" : dtype;
  const std::string shared = dtype == "mxfp4+bf16" ? "bf16" : dtype;
  for (int64_t e = 0; e < E; ++e) s.w.experts.push_back(Expert(routed, F, rng));
  s.w.has_shared = true;
  s.w.shared_experts = Expert(shared, 2 * F, rng);  // n_shared = 2
  std::normal_distribution<float> nd(0.0f, 1.0f);
  s.x.resize(T * D);
  for (auto& v : s.x) v = nd(rng);
  s.routes.resize(E);
  // Expert 3 gets nothing; expert 0 gets most rows (uneven, as real routing is).
  for (int64_t r = 0; r < T; ++r) {
    const int64_t a = r % 4 == 3 ? 1 : 0, b = r % 2 == 0 ? 2 : 4;
    s.routes[a].rows.push_back(r);
    s.routes[a].weights.push_back(0.25f + 0.01f * r);
    s.routes[b].rows.push_back(r);
    s.routes[b].weights.push_back(0.75f - 0.01f * r);
  }
  return s;
}

std::vector<MoeKernelConfig> AllKinds() {
  std::vector<MoeKernelConfig> out;
  for (MoeSplit sp : {MoeSplit::kColumns, MoeSplit::kBatched, MoeSplit::kExperts}) {
    for (bool fuse : {false, true}) {
      for (int mr : {0, 1, 2, 4}) {
        for (int nb : {0, 7}) {
          for (int64_t tt : {0, 1, 3}) {
            MoeKernelConfig c;
            c.split = sp;
            c.fuse_gate_up = fuse;
            c.tiling = {.mr = mr, .nb = nb};
            c.token_tile = tt;
            out.push_back(c);
          }
        }
      }
    }
  }
  return out;
}

double Silu(double g) { return g / (1 + std::exp(-g)); }

// out = Σ weight · down(SiLU(gate x) ⊙ up x) + shared, in float64 on the stored weights.
std::vector<double> Exact(const MoeCase& s) {
  std::vector<double> out(T * D, 0.0);
  auto mlp = [&](const MlpWeights& m, int64_t r, double wt) {
    const int64_t f = m.gate_proj.n;
    std::vector<double> h(f);
    for (int64_t j = 0; j < f; ++j) {
      double g = 0, u = 0;
      for (int64_t t = 0; t < D; ++t) {
        g += double(s.x[r * D + t]) * m.gate_proj.at(j, t);
        u += double(s.x[r * D + t]) * m.up_proj.at(j, t);
      }
      h[j] = Silu(g) * u;
    }
    for (int64_t d = 0; d < D; ++d) {
      double y = 0;
      for (int64_t j = 0; j < f; ++j) y += h[j] * m.down_proj.at(d, j);
      out[r * D + d] += wt * y;
    }
  };
  for (int64_t e = 0; e < E; ++e) {
    for (size_t i = 0; i < s.routes[e].rows.size(); ++i) {
      mlp(s.w.experts[e], s.routes[e].rows[i], s.routes[e].weights[i]);
    }
  }
  for (int64_t r = 0; r < T; ++r) mlp(s.w.shared_experts, r, 1.0);
  return out;
}

TEST(MoeExperts, EveryConfigEqualsTheDefaultExactly) {
  ThreadPool pool(3);
  for (const std::string dtype : {"bf16", "f32", "mxfp4", "mxfp4+bf16"}) {
    const MoeCase s = Make(dtype);
    for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      const KernelTable* kt = GetKernelTable(l);
      if (kt == nullptr) continue;
      std::vector<float> base(T * D, NAN);
      MoeExperts(*kt, pool, s.w, s.x.data(), T, s.routes, DefaultMoeConfig(), base.data());
      for (float v : base) ASSERT_TRUE(std::isfinite(v));
      for (const MoeKernelConfig& c : AllKinds()) {
        std::vector<float> y(T * D, NAN);
        MoeExperts(*kt, pool, s.w, s.x.data(), T, s.routes, c, y.data());
        ASSERT_EQ(y, base) << dtype << " " << KernelLevelName(l) << " " << MoeConfigString(c);
      }
    }
  }
}

// The default path against float64 math on the stored weights: fp32 error only for bf16 / f32;
// MXFP4 adds the int8 activation rounding (mxfp4.h), within 3 % of the output's scale.
TEST(MoeExperts, DefaultMatchesFloat64) {
  ThreadPool pool(2);
  for (const std::string dtype : {"bf16", "f32", "mxfp4", "mxfp4+bf16"}) {
    const MoeCase s = Make(dtype);
    const std::vector<double> want = Exact(s);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    std::vector<float> y(T * D, NAN);
    MoeExperts(SelectKernels(), pool, s.w, s.x.data(), T, s.routes, DefaultMoeConfig(), y.data());
    const double tol = dtype.starts_with("mxfp4") ? 3e-2 : 1e-5;
    for (int64_t i = 0; i < T * D; ++i) {
      ASSERT_NEAR(y[i], want[i], tol * scale) << dtype << " at " << i;
    }
  }
}

}  // namespace
}  // namespace mx
