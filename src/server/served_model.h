// A model the server serves: its name, engine, tokenizer and chat template. Loaded once at
// start-up; immutable afterwards apart from the engine (thread-safe) and the metrics.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

struct ServedModel {
  std::string name;
  std::string dir;
  std::unique_ptr<Engine> engine;
  tok::Tokenizer tokenizer;
  std::optional<ChatTemplate> chat_template;  // none: chat requests are a 400
  std::string bos_token;
  std::string eos_token;
  int64_t created = 0;  // unix seconds, for /v1/models
  ModelMetrics metrics;

  ServedModel(std::string name, std::string dir, std::unique_ptr<Engine> engine,
              tok::Tokenizer tokenizer);
};

// Reads DIR/tokenizer.json and DIR/tokenizer_config.json (the chat template is optional) and
// wraps `engine`. Errors name the file.
Result<std::unique_ptr<ServedModel>> LoadServedModel(std::string name, const std::string& dir,
                                                     std::unique_ptr<Engine> engine);

}  // namespace mx::server
