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
  auto mlp = [](const MlpWeights& e) {
    return WeightBytes(e.gate_proj) + WeightBytes(e.up_proj) + WeightBytes(e.down_proj);
  };
  int64_t b = WeightBytes(w.lm_head);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    for (const LinearWeight* x : {&lw.attn.q_a_proj, &lw.attn.q_b_proj, &lw.attn.kv_a_proj_with_mqa,
                                  &lw.attn.kv_b_proj, &lw.attn.o_proj}) {
      b += WeightBytes(*x);
    }
    if (lw.has_indexer) {
      for (const LinearWeight* x : {&lw.indexer.wq_b, &lw.indexer.wk, &lw.indexer.weights_proj}) {
        b += WeightBytes(*x);
      }
    }
    if (!lw.is_moe) {
      b += mlp(lw.mlp);
      continue;
    }
    b += WeightBytes(lw.moe.gate);
    if (lw.moe.has_shared) b += mlp(lw.moe.shared_experts);
    const auto it = router.find(static_cast<int64_t>(l));
    if (it == router.end()) continue;
    for (int32_t e : std::set<int32_t>(it->second.experts.begin(), it->second.experts.end())) {
      MX_CHECK_GE(e, 0);
      MX_CHECK_LT(static_cast<size_t>(e), lw.moe.experts.size());
      b += mlp(lw.moe.experts[e]);
    }
  }
  return static_cast<double>(b);
}

}  // namespace mx
