// How many bytes of weights a forward step streams: the numerator of a decode step's
// bandwidth floor (`generate` and bench/model_bench report achieved GB/s and % of floor from it).
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "model/forward_batch.h"
#include "model/op_profile.h"
#include "model/weights.h"

namespace mx {

// Bytes `w` occupies in the layout the kernels read: MXFP4 codes and E8M0 scales (4.25 bits per
// weight), bf16 2 and fp32 4 bytes per weight; 0 for an empty weight (another rank's expert).
int64_t WeightBytes(const LinearWeight& w);

// Bytes of the weights one forward step of the main model reads: the lm_head and every linear
// weight of the decoder layers (attention, indexer, dense FFN, router, shared experts), each
// routed expert counted once if any row of the step picked it. Not counted: the embedding (a
// step reads one row of it per token), norm vectors, and the MTP layer. `router`: the step's
// ForwardOutput::router (run it with ForwardOptions::want_router); a MoE layer missing from it
// counts no routed expert. REQUIRES: every expert id in `router` names an expert of its layer.
// note: kv_b_proj is counted as stored; with an MXFP4 kv_b_proj the absorbed decode form reads
// its fp32 derivative kv_b_uk_t instead, which this undercounts (the quantizer's recipes keep
// attention in bf16 unless --include asks otherwise).
double StepWeightBytes(const ModelWeights& w, const std::map<int64_t, RouterChoice>& router);

// The same bytes by the op that reads them (model/op_profile.h), and the multiply-adds per row
// of each op's linear weights (a routed expert counted num_experts_per_tok times per row): the
// per-op floors of a decode step (bytes) and of a prefill (2 · rows · macs FLOPs; attention's
// own products are not weights and are not counted). Their byte sum is StepWeightBytes.
// int8_macs_per_row: the part of macs_per_row whose weights take Q8 (int8) activations (MXFP4:
// vpdpbusd); the rest run as bf16 dot products (bf16, FP8 decoded to bf16) or fp32.
struct OpWeightCost {
  std::array<double, static_cast<int>(Op::kCount)> bytes{};
  std::array<double, static_cast<int>(Op::kCount)> macs_per_row{};
  std::array<double, static_cast<int>(Op::kCount)> int8_macs_per_row{};
};
OpWeightCost OpWeightCosts(const ModelWeights& w, const std::map<int64_t, RouterChoice>& router,
                           int64_t experts_per_tok);

}  // namespace mx
