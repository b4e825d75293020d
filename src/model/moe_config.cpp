// MoE kernel config names and the model's MoE shape (see moe_config.h).
#include "model/moe_config.h"

#include <iterator>

#include <fmt/format.h>

namespace mx {

const char* MoeSplitName(MoeSplit s) {
  constexpr const char* kNames[] = {"columns", "batched", "experts"};  // MoeSplit's order
  const auto i = static_cast<size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::string MoeConfigString(const MoeKernelConfig& c) {
  return fmt::format("split={} fuse={} mr={} nb={} tt={}", MoeSplitName(c.split),
                     c.fuse_gate_up ? 1 : 0, c.tiling.mr, c.tiling.nb, c.token_tile);
}

MoeKernelConfig DefaultMoeConfig() { return MoeKernelConfig{}; }

MoeShape MoeShapeOf(const ModelConfig& c) {
  return {c.hidden_size, c.moe_intermediate_size, c.n_routed_experts, c.num_experts_per_tok,
          c.n_shared_experts};
}

}  // namespace mx
