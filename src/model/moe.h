// Feed-forward blocks (glm-moe-dsa.md §3.8, §3.9): the dense SwiGLU FFN and the MoE block with
// noaux_tc routing in fp32 (sigmoid scores, fp32 correction bias for selection only,
// group-limited top-k when n_group > 1, norm_topk_prob, routed_scaling_factor) and an unscaled
// shared expert. Rows are grouped by expert so each expert runs one GEMM over its tokens.
// Ties in group and expert selection go to the lower index.
// Legend: T rows, D hidden_size, E n_routed_experts, k num_experts_per_tok.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/forward_batch.h"
#include "model/layer_context.h"
#include "model/moe_config.h"
#include "model/weights.h"

namespace mx {

// out[T, D] = down · (SiLU(gate · m) ⊙ (up · m)).
void SwiGluMlp(const KernelTable& kt, ThreadPool& pool, const MlpWeights& w, const float* m,
               int64_t rows, float* out, GemmTiling t = {});

// m [T, D] → out [T, D] (T rows: ctx.rows(), or fewer where the caller pruned them). `trace`,
// when not null, receives each row's experts (ascending) and weights, [T, k]. The expert part
// runs as ctx.opts.moe says.
void MoeBlock(const LayerContext& ctx, const MoeWeights& w, const float* m, int64_t T, float* out,
              RouterChoice* trace);

// The rows routed to one expert (ascending) and their gate weights.
struct ExpertRows {
  std::vector<int64_t> rows;
  std::vector<float> weights;
};

// The expert half of the MoE block: out[T, D] = Σ_e Σ_{r ∈ by_expert[e]} weight · expert_e(m[r])
// + shared(m), run as `cfg` says. Every config adds the same products in the same order
// (experts ascending, then the shared expert), so configs differ only by the kernels' tiling,
// which is bit-identical (gemm_tiling.h). by_expert: [E]. REQUIRES: ValidRowTile(cfg.tiling.mr).
void MoeExperts(const KernelTable& kt, ThreadPool& pool, const MoeWeights& w, const float* m,
                int64_t T, const std::vector<ExpertRows>& by_expert, const MoeKernelConfig& cfg,
                float* out);

// "bf16", "mxfp4" or "f32": the routed experts' weight format; "" for a model without MoE layers.
std::string MoeExpertDtype(const ModelWeights& w);

}  // namespace mx
