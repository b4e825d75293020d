// What loading a model directory takes (engine/model_factory.h LoadModel): the kernel choice, the
// MoE configs, one rank's shard, whether to read the tokenizer. EngineOptions holds one as
// `model`, so serve, generate, the benches and the tests name these once. Strings from a command
// line are parsed into these enums where they are read (kernels.h ParseKernelLevel, ...).
#pragma once

#include <optional>
#include <string>

#include "kernels/kernels.h"
#include "model/shard.h"

namespace mx {

enum class TokenizerLoad {
  kIfPresent,  // <dir>/tokenizer.json when it exists (stop strings), else none
  kRequired,   // an error names the file when it is missing or malformed
  kNone,       // not read (ids in, ids out)
};

struct ModelLoadOptions {
  std::string model_dir;
  std::optional<KernelLevel> kernels;  // nullopt = this CPU's best (kernels.h ResolveKernels)
  GemmActivations gemm_activations = GemmActivations::kBf16;  // serve's default
  std::string tuned_config_dir;  // tuned MoE configs, searched after the shipped configs/moe/
  bool untuned_moe = false;      // run the MoE on its untuned default (no config lookup)
  bool log_moe_tuning = true;    // LogMoeTuning: which MoE config runs (once per load)
  ModelShard shard;              // default: the whole model
  TokenizerLoad tokenizer = TokenizerLoad::kIfPresent;
};

}  // namespace mx
