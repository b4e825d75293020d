// Which part of the model one rank of a tensor-parallel (`--tp N`) or expert-parallel (`--ep N`)
// group holds. The weights are sliced at load (weights.h) so each rank maps and keeps only its
// part; the forward adds one all-reduce per row-parallel layer (model.h). The split:
//   attention   by heads: q_b_proj and kv_b_proj rows (column-parallel) of the rank's heads,
//               o_proj columns (row-parallel, then all-reduce); the absorbed decode form runs
//               on the rank's heads only. q_a_proj, kv_a_proj_with_mqa and their norms are
//               replicated: the 576-value MLA cache row is shared by every head, so every rank
//               computes it and keeps a full copy of the KV cache (as sglang does for MLA).
//   indexer     replicated: its top-k needs the scores summed over all index heads, and it is a
//               small share of the work; splitting it would add an all-reduce of [T, S] scores
//               per full layer. Every rank computes the same selection bit for bit (its inputs
//               are all-reduced, identical on every rank).
//   dense FFN   gate/up rows (column-parallel), down columns (row-parallel, then all-reduce).
//   MoE (tp)    every routed and shared expert split along moe_intermediate_size like the FFN;
//               the router is replicated; one all-reduce after routed + shared.
//   MoE (ep)    whole routed experts per rank (expert e lives on rank e·size/E's block, see
//               OwnsExpert); dispatch is local (every rank holds every token's activation and
//               runs the tokens routed to its own experts) and the combine is the same one
//               all-reduce; the shared expert is split along its width as with tp.
//   lm_head     by vocabulary rows (each rank ⌈V/size⌉), logits all-gathered.
//   embedding, norms, MTP glue (enorm, hnorm, eh_proj, shared_head.norm): replicated.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "io/model_config.h"

namespace mx {

struct ModelShard {
  int rank = 0;
  int size = 1;                  // 1: the whole model
  bool expert_parallel = false;  // MoE by whole experts instead of by width

  bool whole() const { return size == 1; }
  // [first, first + count) of n split evenly: rank r holds n/size items from r·n/size.
  int64_t First(int64_t n) const { return n / size * rank; }
  int64_t Count(int64_t n) const { return n / size; }
  // EP: whether routed expert e (of E) lives on this rank (contiguous blocks of E/size).
  bool OwnsExpert(int64_t e, int64_t E) const { return !expert_parallel || e / (E / size) == rank; }
  // lm_head rows per rank (the last rank's block is shorter when size does not divide V).
  int64_t VocabBlock(int64_t V) const { return (V + size - 1) / size; }
  std::string Describe() const;
};

// Checks that `config` divides as `shard` needs: attention heads, intermediate sizes, routed
// experts for ep. (An MXFP4 weight split along its input needs 32-aligned slices too: the
// loader checks that per tensor.) Errors: InvalidArgument naming the flag (--tp / --ep), the
// field and its value.
Status CheckShardable(const ModelConfig& config, const ModelShard& shard);

}  // namespace mx
