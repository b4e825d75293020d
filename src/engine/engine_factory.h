// Building an Engine around any ModelRunner (tests and benchmarks use fakes; CreateEngine uses
// the real model from engine/model_factory.h). Not part of the server's interface.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace mx {

// `eos_ids`: the model's EOS ids (config.json + generation_config.json: LoadEosTokenIds in
// io/generation_config.h). `kv_scales`: one per layer (num_hidden_layers + MTP) or empty for
// 1.0.
Result<std::unique_ptr<Engine>> CreateEngineWithRunner(const EngineOptions& options,
                                                       std::unique_ptr<ModelRunner> runner,
                                                       std::optional<tok::Tokenizer> tokenizer,
                                                       std::vector<int32_t> eos_ids,
                                                       std::vector<float> kv_scales = {});

}  // namespace mx
