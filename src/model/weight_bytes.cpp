// See weight_bytes.h.
#include "model/weight_bytes.h"

#include <set>

#include "base/check.h"
#include "model/weight_format.h"

namespace mx {

int64_t WeightBytes(const LinearWeight& w) {
  if (w.empty()) return 0;
  return FormatOf(w).bytes(w);
}

double StepWeightBytes(const ModelWeights& w, const std::map<int64_t, RouterChoice>& router) {
  double b = 0;
  for (double x : OpWeightCosts(w, router, 0).bytes) b += x;
  return b;
}

OpWeightCost OpWeightCosts(const ModelWeights& w, const std::map<int64_t, RouterChoice>& router,
                           int64_t experts_per_tok) {
  OpWeightCost c;
  // x's multiply-adds per row (times `uses`), and the int8 part of them.
  auto macs = [&](Op op, const LinearWeight& x, double uses) {
    if (x.empty()) return;
    const double n = uses * static_cast<double>(x.n * x.k);
    c.macs_per_row[static_cast<int>(op)] += n;
    if (FormatOf(x).q8_activations) c.int8_macs_per_row[static_cast<int>(op)] += n;
  };
  auto add = [&](Op op, const LinearWeight& x) {
    c.bytes[static_cast<int>(op)] += static_cast<double>(WeightBytes(x));
    macs(op, x, 1.0);
  };
  auto mlp = [&](Op op, const MlpWeights& e) {
    for (const LinearWeight* p : {&e.gate_proj, &e.up_proj, &e.down_proj}) add(op, *p);
  };
  add(Op::kLmHead, w.lm_head);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    add(Op::kQkvA, lw.attn.q_a_proj);
    add(Op::kQkvA, lw.attn.kv_a_proj_with_mqa);
    add(Op::kQb, lw.attn.q_b_proj);
    add(Op::kKvB, lw.attn.kv_b_proj);
    add(Op::kOProj, lw.attn.o_proj);
    if (lw.has_indexer) {
      for (const LinearWeight* x : {&lw.indexer.wq_b, &lw.indexer.wk, &lw.indexer.weights_proj}) {
        add(Op::kIndexer, *x);
      }
    }
    if (!lw.is_moe) {
      mlp(Op::kDenseMlp, lw.mlp);
      continue;
    }
    add(Op::kRouter, lw.moe.gate);
    if (lw.moe.has_shared) mlp(Op::kExperts, lw.moe.shared_experts);
    // Routed experts: per row, experts_per_tok of them (all of the same shape).
    for (const MlpWeights& e : lw.moe.experts) {
      if (e.gate_proj.empty()) continue;
      for (const LinearWeight* p : {&e.gate_proj, &e.up_proj, &e.down_proj}) {
        macs(Op::kExperts, *p, static_cast<double>(experts_per_tok));
      }
      break;
    }
    const auto it = router.find(static_cast<int64_t>(l));
    if (it == router.end()) continue;
    for (int32_t e : std::set<int32_t>(it->second.experts.begin(), it->second.experts.end())) {
      MX_CHECK_GE(e, 0);
      MX_CHECK_LT(static_cast<size_t>(e), lw.moe.experts.size());
      const MlpWeights& x = lw.moe.experts[e];
      for (const LinearWeight* p : {&x.gate_proj, &x.up_proj, &x.down_proj}) {
        c.bytes[static_cast<int>(Op::kExperts)] += static_cast<double>(WeightBytes(*p));
      }
    }
  }
  return c;
}

}  // namespace mx
