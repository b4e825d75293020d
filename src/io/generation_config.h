// HF `generation_config.json`: the fields the engine uses. Today that is the EOS ids, which
// the engine stops at together with config.json's (models list more stop ids there than in
// config.json, e.g. GLM's <|user|> and <|observation|>).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"

namespace mx {

struct GenerationConfig {
  bool present = false;                // the file exists
  std::vector<int32_t> eos_token_ids;  // "eos_token_id": an integer or a list of integers
};

// `path` absent: an empty GenerationConfig (present = false). Errors: InvalidArgument naming
// the file for text that is not JSON, and the field for an eos_token_id that is not an integer
// or a list of integers.
Result<GenerationConfig> LoadGenerationConfig(const std::string& path);

// EOS ids of a model directory, sorted and without repeats: config.json's eos_token_id plus
// generation_config.json's (when the file exists).
Result<std::vector<int32_t>> LoadEosTokenIds(const std::string& model_dir,
                                             const ModelConfig& config);

}  // namespace mx
