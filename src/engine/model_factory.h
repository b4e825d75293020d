// The one place that assembles what runs a model directory: the kernel table, the weights (or
// one rank's shard of them), the MoE kernel configs, the tokenizer and the EOS ids, and a
// ModelRunner over them. `CreateEngine` (serve), `generate`, `bench offline`, the MPI worker
// ranks, the offline verbs and the tests build their models here, so a flag such as --kernels
// or --tuned-config-dir means the same everywhere.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model_runner.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/communicator.h"
#include "tokenizer/tokenizer.h"
#include "tune/moe_tuning.h"

namespace mx {

enum class TokenizerLoad {
  kIfPresent,  // <dir>/tokenizer.json when it exists (stop strings), else none
  kRequired,   // an error names the file when it is missing or malformed
  kNone,       // not read (ids in, ids out)
};

struct ModelLoadOptions {
  std::string model_dir;
  std::string kernels;  // "" = this CPU's best; ref|avx2|avx512 (kernels.h ResolveKernels)
  std::string gemm_activations = "bf16";  // fp32|bf16 (kernels.h GemmActivations; serve's default)
  std::string tuned_config_dir;  // tuned MoE configs, searched after the shipped configs/moe/
  bool untuned_moe = false;      // run the MoE on its untuned default (no config lookup)
  bool log_moe_tuning = true;    // LogMoeTuning: which MoE config runs (once per load)
  ModelShard shard;              // default: the whole model
  TokenizerLoad tokenizer = TokenizerLoad::kIfPresent;
};

struct LoadedModel {
  std::string model_dir;
  ModelShard shard;                      // as loaded
  const KernelTable* kernels = nullptr;  // static lifetime
  std::unique_ptr<Model> model;
  MoeTuning moe;  // default-constructed (untuned default) with untuned_moe
  std::optional<tok::Tokenizer> tokenizer;
  std::vector<int32_t> eos_ids;  // config.json + generation_config.json (io/generation_config.h)
};

// Errors name the flag, file or tensor that is wrong (ResolveKernels, Model::Load,
// ResolveMoeTuning, tok::Tokenizer::FromFile, LoadEosTokenIds).
Result<LoadedModel> LoadModel(const ModelLoadOptions& options);

// The runner the engine drives, taking m.model and m.moe (m.tokenizer and m.eos_ids stay with
// the caller); `threads` 0 = one per core:
//   m.shard whole        Model::Forward on a ThreadPool of `threads` (model_runner.h);
//   tp_comm set          rank 0 driving the group over it, e.g. MPI (tp_runner.h);
//   else                 m.shard.size ranks as threads of this process, ranks 1.. loaded here
//                        and `threads` split between them.
// REQUIRES: m.model is set and is rank 0's shard (ModelShard{0, N, ep}); with tp_comm, N is
// tp_comm->size() and tp_comm outlives the runner. Errors: those of loading the other ranks.
Result<std::unique_ptr<ModelRunner>> MakeModelRunner(LoadedModel& m, int threads,
                                                     Communicator* tp_comm = nullptr);

}  // namespace mx
