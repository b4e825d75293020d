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
#include "engine/model_load_options.h"
#include "engine/model_runner.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/communicator.h"
#include "tokenizer/tokenizer.h"
#include "tune/moe_tuning.h"

namespace mx {

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
