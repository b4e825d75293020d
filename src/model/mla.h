// Multi-head latent attention (glm-moe-dsa.md §3.4, §3.5, §3.7), split in two steps so the DSA
// indexer can run between them on the q latent:
//   MlaProject: a → cq (normed q latent), q (per head [nope | rope], rope rotated), and the
//               layer's KV rows [latent c | k_pe] written for every row's position.
//   MlaAttend:  q + cached rows (restricted to each row's top-k set) → attention output.
// Both forms are available: expanded (k_nope/v materialised from the latent for the cached
// positions: a long prompt) and absorbed (queries moved into latent space: MQA over the 576-d
// cache: decode, small chunks after a long context); mla.cpp picks per sequence by FLOP cost.
// They are equal up to fp32 rounding (model_equivalence_test.cpp, long_prompt_test.cpp).
// Legend: T rows, D hidden_size, H heads, Dn/Dr/Dv head dims, Rq q_lora_rank,
// Rkv kv_lora_rank, K index_topk.
#pragma once

#include <cstdint>

#include "model/layer_context.h"
#include "model/weights.h"

namespace mx {

// a [T, D] → cq [T, Rq], q [T, H·(Dn+Dr)]. Writes the KV row (seq, layer, pos) of every row:
// MlaQuery then MlaWriteKv.
void MlaProject(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* a,
                float* cq, float* q);
// The query half: a [T, D] → cq [T, Rq], q [T, H·(Dn+Dr)] (rope at each row's position).
void MlaQuery(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* a,
              float* cq, float* q);
// The KV half: a [T, D] → the KV row (seq, layer, pos) of every row.
void MlaWriteKv(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* a);

// q [T, H·(Dn+Dr)], topk [T, K] (ascending, −1 padded) or nullptr for plain causal attention;
// out [T, D]. REQUIRES: KV rows 0..pos[r] of each row's sequence are written.
void MlaAttend(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* q,
               const int32_t* topk, float* out);

}  // namespace mx
