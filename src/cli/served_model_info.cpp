// ModelInfo from a checkpoint directory.
#include "cli/served_model_info.h"

#include <filesystem>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kv/paged_kv_store.h"
#include "model/checkpoint_check.h"
#include "model/tensor_plan.h"

namespace mx::cli {

Result<server::ModelInfo> DescribeServedModel(const std::string& dir, KvCacheDtype kv) {
  MX_ASSIGN_OR_RETURN(ModelConfig c,
                      LoadModelConfig((std::filesystem::path(dir) / "config.json").string()));
  MX_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir));
  const std::vector<TensorSpec> specs = ExpectedTensors(c);
  const ParamSummary ps = Summarize(c, specs);
  server::ModelInfo info;
  info.architecture = ArchitectureName(c.architecture);
  info.params_total = ps.total_params;
  info.params_active = ps.active_params;
  for (const TensorMatch& m : CheckCheckpoint(c, specs, ckpt).matches) {
    ++info.weight_formats[WeightFormatName(m.format)];
  }
  info.kv_cache_dtype = KvCacheDtypeName(kv);
  // The engine knows which tuned MoE config it loaded; serve fills that in (kernel_tuning()).
  info.tuned_configs = "none";
  return info;
}

}  // namespace mx::cli
