// Building an Engine around any ModelRunner (tests and benchmarks use fakes; CreateEngine uses
// the real model). Not part of the server's interface.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace mx {

// `eos_ids`: the model's EOS ids (config.json + generation_config.json). `kv_scales`: one per
// layer (num_hidden_layers + MTP) or empty for 1.0.
Result<std::unique_ptr<Engine>> CreateEngineWithRunner(const EngineOptions& options,
                                                       std::unique_ptr<ModelRunner> runner,
                                                       std::optional<tok::Tokenizer> tokenizer,
                                                       std::vector<int32_t> eos_ids,
                                                       std::vector<float> kv_scales = {});

// EOS ids of a model directory: config.json's eos_token_id plus generation_config.json's.
Result<std::vector<int32_t>> LoadEosTokenIds(const std::string& model_dir,
                                             const ModelConfig& config);

}  // namespace mx
