// `mxserve inspect MODEL_DIR | --config config.json`: tensor table, parameter and byte counts.
#include "cli/verb.h"

namespace mx::cli {
namespace {

struct InspectArgs {
  std::string model_dir;
  std::string config;
  bool json = false;
};

VerbRun SetupInspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* sub = app.add_subcommand("inspect", "Config, tensor table, parameters, bytes, formats");
  sub->add_option("model_dir", args->model_dir, "Hugging Face checkpoint directory");
  sub->add_option("--config", args->config, "inspect a config.json alone (no weights)");
  sub->add_flag("--json", args->json, "machine-readable output");
  return [args]() -> int { return Fail("inspect: not implemented yet"); };
}

MX_REGISTER_VERB(inspect, "inspect", 40, SetupInspect);

}  // namespace
}  // namespace mx::cli
