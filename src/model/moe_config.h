// How one MoE block runs its expert GEMMs (MoeKernelConfig), and the shape that tuned configs
// are kept for (MoeShape). The model takes a config per forward and knows nothing of where it
// came from: tune/moe_tuning.h finds, reads and reports the tuned files, and the runner picks
// the config for each forward's row count.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_config.h"
#include "kernels/gemm_tiling.h"

namespace mx {

// How the expert MLPs of one MoE block share the thread pool.
enum class MoeSplit {
  kColumns,  // expert by expert, each GEMM split over the pool by output columns (pre-tuning)
  kBatched,  // every active expert's gate/up columns in one parallel pass, then every down
  kExperts,  // whole experts per worker (balanced by rows), each GEMM single-threaded
};
const char* MoeSplitName(MoeSplit s);  // "columns", "batched", "experts"

struct MoeKernelConfig {
  MoeSplit split = MoeSplit::kColumns;
  bool fuse_gate_up = false;  // kColumns: gate, up and SiLU·up in one parallel pass
  GemmTiling tiling;          // every expert GEMM (gate, up, down)
  int64_t token_tile = 0;     // rows of one expert per pass; 0 = all its rows at once

  bool operator==(const MoeKernelConfig&) const = default;
};
// "split=batched fuse=1 mr=2 nb=64 tt=0".
std::string MoeConfigString(const MoeKernelConfig& c);
// What runs without a tuned config: exactly the MoE block's behaviour before tuning existed
// (expert by expert, column-split GEMMs, the kernels' default tiling).
MoeKernelConfig DefaultMoeConfig();

// D model_dim (hidden_size), F moe_inter (moe_intermediate_size), E n_routed_experts,
// k topk (num_experts_per_tok).
struct MoeShape {
  int64_t model_dim = 0, moe_inter = 0, n_experts = 0, topk = 0, n_shared = 0;
  bool operator==(const MoeShape&) const = default;
};
MoeShape MoeShapeOf(const ModelConfig& c);

}  // namespace mx
