// Kernels, model, MoE configs, tokenizer and EOS ids for a model directory, in one place.
#include "engine/model_factory.h"

#include <filesystem>

#include "base/check.h"
#include "engine/tp_runner.h"
#include "io/generation_config.h"
#include "model/moe.h"

namespace mx {

Result<LoadedModel> LoadModel(const ModelLoadOptions& o) {
  LoadedModel m;
  m.model_dir = o.model_dir;
  m.shard = o.shard;
  MX_ASSIGN_OR_RETURN(m.kernels, ResolveKernels(o.kernels, o.gemm_activations));
  MX_ASSIGN_OR_RETURN(m.model, Model::Load(o.model_dir, nullptr, o.shard));
  MX_ASSIGN_OR_RETURN(m.eos_ids, LoadEosTokenIds(o.model_dir, m.model->config()));
  const std::string tok_path = (std::filesystem::path(o.model_dir) / "tokenizer.json").string();
  if (o.tokenizer == TokenizerLoad::kRequired ||
      (o.tokenizer == TokenizerLoad::kIfPresent && std::filesystem::exists(tok_path))) {
    MX_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::Tokenizer::FromFile(tok_path));
    m.tokenizer.emplace(std::move(t));
  }
  if (!o.untuned_moe) {
    const std::string dtype = MoeExpertDtype(m.model->weights());
    MX_ASSIGN_OR_RETURN(m.moe, ResolveMoeTuning(MoeShapeOf(m.model->config()), dtype,
                                                KernelLevelName(m.kernels->level),
                                                o.tuned_config_dir, !dtype.empty()));
    if (o.log_moe_tuning) LogMoeTuning(m.moe);
  }
  return m;
}

Result<std::unique_ptr<ModelRunner>> MakeModelRunner(LoadedModel& m, int threads,
                                                     Communicator* tp_comm) {
  MX_CHECK(m.model != nullptr);
  MX_CHECK_EQ(m.shard.rank, 0);
  const KernelTable& kt = *m.kernels;
  if (m.shard.whole()) return MakeModelRunner(std::move(m.model), kt, threads, std::move(m.moe));
  if (tp_comm != nullptr) {
    MX_CHECK_EQ(tp_comm->size(), m.shard.size);
    return MakeTpDriverRunner(std::move(m.model), *tp_comm, kt, threads, std::move(m.moe));
  }
  std::vector<std::unique_ptr<Model>> shards;
  shards.push_back(std::move(m.model));
  for (int r = 1; r < m.shard.size; ++r) {
    MX_ASSIGN_OR_RETURN(
        std::unique_ptr<Model> s,
        Model::Load(m.model_dir, nullptr, ModelShard{r, m.shard.size, m.shard.expert_parallel}));
    shards.push_back(std::move(s));
  }
  MX_ASSIGN_OR_RETURN(std::unique_ptr<InProcessTpRunner> runner,
                      InProcessTpRunner::Create(std::move(shards), kt, threads, std::move(m.moe)));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace mx
