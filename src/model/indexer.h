// The DSA lightning indexer (glm-moe-dsa.md §3.6): scores every cached position t <= p of a
// query row with Σ_h w_h · ReLU(qI_h · kI_t / sqrt(Di)) and keeps the top index_topk (ties →
// lower position first). Writes this layer's indexer keys for every row first, so causal rows
// of one prefill see each other's keys. When p+1 <= index_topk the set is all of 0..p and the
// scores are not computed (the keys are still written).
// Legend: T rows, D hidden_size, Rq q_lora_rank, Hi index_n_heads, Di index_head_dim,
// K index_topk.
#pragma once

#include <cstdint>

#include "model/layer_context.h"
#include "model/weights.h"

namespace mx {

// a [T, D] (normed layer input), cq [T, Rq] (normed q latent) → topk [T, K]: ascending
// positions, −1 padded. `keys_written`: every key up to each row's position is in the store
// already (IndexerWriteKeys over a wider set of rows), so this call only queries.
void IndexerTopK(const LayerContext& ctx, const IndexerWeights& w, int64_t layer, const float* a,
                 const float* cq, int32_t* topk, bool keys_written = false);
// The keys half alone: a [T, D] → this layer's indexer key of every row, written.
void IndexerWriteKeys(const LayerContext& ctx, const IndexerWeights& w, int64_t layer,
                      const float* a);

}  // namespace mx
