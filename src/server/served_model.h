// A model the server serves: its name, engine, tokenizer and chat template. Loaded once at
// start-up; immutable afterwards apart from the engine (thread-safe) and the metrics.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "grammar/constraint.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

// What the status page and /get_server_info say about a model; filled by whoever loads it
// (the server itself never reads weights). Empty fields are shown as unknown.
struct ModelInfo {
  std::string architecture;  // "GlmMoeDsaForCausalLM"
  int64_t params_total = 0;
  int64_t params_active = 0;                      // per token (MoE: routed top-k + shared)
  std::map<std::string, int64_t> weight_formats;  // "mxfp4" -> tensor count
  std::string kv_cache_dtype;                     // as the engine resolved it: "bf16", ...
  std::string tuned_configs = "none";             // tuned kernel configs in use, or "none"
};

struct ServedModel {
  std::string name;
  std::string dir;
  std::unique_ptr<Engine> engine;
  tok::Tokenizer tokenizer;
  std::optional<ChatFormat> chat_template;  // none: chat requests are a 400
  std::string eos_token;                    // tokenizer_config.json's (grammars' EOS fallback)
  // Whether the chat template opens a `<think>` block when a request does not say
  // (chat_template_kwargs.enable_thinking absent): the model's own default, which the web page
  // starts from. False without a template.
  bool thinking_default = false;
  // Whether the chat template reads `clear_thinking` (GLM-4.7, GLM-5.x: true drops the reasoning
  // of assistant turns before the last user message), and the value it gets when a request's
  // chat_template_kwargs do not say (serve --clear-thinking; Server::AddModel sets it). False
  // keeps every turn's reasoning, so a session's rendered prompt only grows and the prefix cache
  // holds the whole previous turn.
  bool template_takes_clear_thinking = false;
  bool clear_thinking = false;
  int64_t created = 0;  // unix seconds, for /v1/models
  ModelMetrics metrics;
  ModelInfo info;
  // Limits of the grammars (set before the first grammars() call; Server::AddModel sets them).
  grammar::GrammarCacheOptions grammar_options;

  ServedModel(std::string name, std::string dir, std::unique_ptr<Engine> engine,
              tok::Tokenizer tokenizer);

  // The chat template over a conversation in the chat route's shape, with the generation
  // prompt; `clear_thinking` as above unless `kwargs` give it. REQUIRES: chat_template. Errors are
  // the template's (the client's fault: a 400).
  Result<std::string> RenderChat(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools,
                                 const nlohmann::ordered_json& kwargs) const;

  // Structured-output grammars compiled for this model's vocabulary (built on first use: the
  // vocabulary trie; EOS = the engine's ids, else the tokenizer's eos_token). Thread-safe.
  grammar::GrammarCache& grammars();

 private:
  std::once_flag grammars_once_;
  std::unique_ptr<grammar::GrammarCache> grammars_;
};

// Reads DIR/tokenizer.json and DIR/tokenizer_config.json (the chat template is optional) and
// wraps `engine`. A non-empty `chat_template_file` (serve --chat-template) is a Jinja file that
// replaces the checkpoint's template. Errors name the file.
Result<std::unique_ptr<ServedModel>> LoadServedModel(std::string name, const std::string& dir,
                                                     std::unique_ptr<Engine> engine,
                                                     const std::string& chat_template_file = "");

}  // namespace mx::server
