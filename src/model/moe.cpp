// Dense FFN and MoE block (see moe.h).
#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "base/scratch.h"
#include "kernels/mxfp4.h"
#include "model/weight_format.h"

namespace mx {

void SwiGluMlp(const KernelTable& kt, ThreadPool& pool, const MlpWeights& w, const float* m,
               int64_t rows, float* out, GemmTiling t) {
  const int64_t F = w.gate_proj.n;
  static thread_local std::vector<float> gs, us;  // grown to the largest call, then reused
  float* g = Grow(gs, rows * F);                  // [rows, F]
  float* u = Grow(us, rows * F);
  Linear(kt, pool, m, rows, w.gate_proj, g, t);
  Linear(kt, pool, m, rows, w.up_proj, u, t);
  kt.swiglu(g, u, rows * F, g);
  Linear(kt, pool, g, rows, w.down_proj, out, t);
}

std::string MoeExpertDtype(const ModelWeights& w) {
  for (const LayerWeights& l : w.layers) {
    if (!l.is_moe || l.moe.experts.empty()) continue;
    const LinearWeight& g = l.moe.experts[0].gate_proj;
    return FormatOf(g).name;
  }
  return "";
}

namespace {

struct Route {
  std::vector<int32_t> experts;  // [k] in selection order
  std::vector<float> weights;    // [k]
};

// noaux_tc routing of one row from its fp32 router logits [E].
Route RouteRow(const LayerContext& ctx, const MoeWeights& w, const float* logits) {
  const ModelConfig& c = ctx.c;
  const int64_t E = c.n_routed_experts, k = c.num_experts_per_tok, G = c.n_group;
  std::vector<float> s(E), b(E);
  for (int64_t e = 0; e < E; ++e) {
    s[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    b[e] = s[e] + w.e_score_correction_bias[e];  // selection only
  }
  if (G > 1) {
    const int64_t per = E / G;
    MX_CHECK_GE(per, 2);           // the group score is a top-2 sum
    std::vector<float> gscore(G);  // sum of the top-2 b in each group
    for (int64_t gi = 0; gi < G; ++gi) {
      int32_t top2[2];
      ctx.kt.topk(b.data() + gi * per, per, 2, top2);
      gscore[gi] = b[gi * per + top2[0]] + b[gi * per + top2[1]];
    }
    std::vector<int32_t> keep(c.topk_group);
    ctx.kt.topk(gscore.data(), G, c.topk_group, keep.data());
    std::vector<bool> kept(G, false);
    for (int32_t gi : keep) kept[gi] = true;
    for (int64_t e = 0; e < E; ++e) {
      if (!kept[e / per]) b[e] = -std::numeric_limits<float>::infinity();
    }
  }
  Route rt;
  rt.experts.resize(k);
  ctx.kt.topk(b.data(), E, k, rt.experts.data());
  rt.weights.resize(k);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    rt.weights[i] = s[rt.experts[i]];
    sum += rt.weights[i];
  }
  for (int64_t i = 0; i < k; ++i) {
    if (c.norm_topk_prob) rt.weights[i] /= sum + 1e-20f;
    rt.weights[i] *= static_cast<float>(c.routed_scaling_factor);
  }
  return rt;
}

}  // namespace

void MoeBlock(const LayerContext& ctx, const MoeWeights& w, const float* m, int64_t T, float* out,
              RouterChoice* trace) {
  const ModelConfig& c = ctx.c;
  const int64_t E = c.n_routed_experts, k = c.num_experts_per_tok;
  OpTimer tr(ctx.opts.profile, Op::kRouter);
  std::vector<float> logits(T * E);  // [T, E] fp32 router logits
  Linear(ctx.kt, ctx.pool, m, T, w.gate, logits.data());
  std::vector<Route> routes(T);
  std::vector<ExpertRows> by_expert(E);
  for (int64_t r = 0; r < T; ++r) {
    routes[r] = RouteRow(ctx, w, logits.data() + r * E);
    for (int64_t i = 0; i < k; ++i) {
      ExpertRows& er = by_expert[routes[r].experts[i]];
      er.rows.push_back(r);
      er.weights.push_back(routes[r].weights[i]);
    }
  }
  // Expert parallelism: another rank runs the rows of the experts this one does not hold.
  for (int64_t e = 0; e < E; ++e) {
    if (w.experts[e].gate_proj.empty()) by_expert[e] = {};
  }
  {
    OpTimer te(ctx.opts.profile, Op::kExperts);
    MoeExperts(ctx.kt, ctx.pool, w, m, T, by_expert, ctx.opts.moe, out);
  }
  if (trace != nullptr) {
    trace->experts.resize(T * k);
    trace->weights.resize(T * k);
    for (int64_t r = 0; r < T; ++r) {
      std::vector<int64_t> order(k);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t b) { return routes[r].experts[a] < routes[r].experts[b]; });
      for (int64_t i = 0; i < k; ++i) {
        trace->experts[r * k + i] = routes[r].experts[order[i]];
        trace->weights[r * k + i] = routes[r].weights[order[i]];
      }
    }
  }
}

}  // namespace mx
