// Feed-forward blocks (glm-moe-dsa.md §3.8, §3.9): the dense SwiGLU FFN and the MoE block with
// noaux_tc routing in fp32 (sigmoid scores, fp32 correction bias for selection only,
// group-limited top-k when n_group > 1, norm_topk_prob, routed_scaling_factor) and an unscaled
// shared expert. Rows are grouped by expert so each expert runs one GEMM over its tokens.
// Ties in group and expert selection go to the lower index.
// Legend: T rows, D hidden_size, E n_routed_experts, k num_experts_per_tok.
#pragma once

#include <cstdint>

#include "model/forward_batch.h"
#include "model/layer_context.h"
#include "model/weights.h"

namespace mx {

// out[T, D] = down · (SiLU(gate · m) ⊙ (up · m)).
void SwiGluMlp(const KernelTable& kt, ThreadPool& pool, const MlpWeights& w, const float* m,
               int64_t rows, float* out);

// m [T, D] → out [T, D]. `trace`, when not null, receives each row's experts (ascending) and
// weights, [T, k].
void MoeBlock(const LayerContext& ctx, const MoeWeights& w, const float* m, float* out,
              RouterChoice* trace);

}  // namespace mx
