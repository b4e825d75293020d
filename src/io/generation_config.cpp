// generation_config.json -> GenerationConfig (the EOS ids).
#include "io/generation_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace mx {

Result<GenerationConfig> LoadGenerationConfig(const std::string& path) {
  GenerationConfig g;
  std::ifstream f(path);
  if (!f) return g;
  g.present = true;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("{}: not valid JSON", path);
  if (j.is_object() && j.contains("eos_token_id")) {
    const auto& v = j["eos_token_id"];
    std::vector<nlohmann::json> items;
    if (v.is_array()) {
      items.assign(v.begin(), v.end());
    } else {
      items.push_back(v);
    }
    for (const auto& e : items) {
      if (!e.is_number_integer()) {
        return InvalidArgument("{}: eos_token_id must be an integer or a list of integers", path);
      }
      g.eos_token_ids.push_back(e.get<int32_t>());
    }
  }
  return g;
}

Result<std::vector<int32_t>> LoadEosTokenIds(const std::string& model_dir,
                                             const ModelConfig& config) {
  std::vector<int32_t> ids;
  for (int64_t id : config.eos_token_ids) ids.push_back(static_cast<int32_t>(id));
  MX_ASSIGN_OR_RETURN(
      GenerationConfig g,
      LoadGenerationConfig((std::filesystem::path(model_dir) / "generation_config.json").string()));
  ids.insert(ids.end(), g.eos_token_ids.begin(), g.eos_token_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace mx
