// Chat templates: turns an OpenAI-style conversation into the model's prompt text with the
// Jinja template from the checkpoint's tokenizer_config.json, byte-identical to
// transformers' apply_chat_template.
//
// Thread safety: a ChatTemplate is immutable after Parse; Render may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace mx {
namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Parse errors read "NAME:LINE:COL: message" (NAME defaults to "template").
  static Result<ChatTemplate> Parse(std::string source, std::string name = "template");

  // `context` is a JSON object whose members become template variables (messages, tools,
  // add_generation_prompt, bos_token, eos_token, enable_thinking, ...). Prefer
  // ordered_json: object key order is visible to templates (tojson of a tool schema, dict
  // iteration) and nlohmann::json sorts keys. Errors read "NAME:LINE:COL: message" and are
  // the client's fault (HTTP 400): raise_exception, type errors, undefined calls, limits.
  Result<std::string> Render(const nlohmann::ordered_json& context) const;
  Result<std::string> Render(const nlohmann::json& context) const;

  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const jinja::Template> tmpl_;
  std::string source_;
};

// The variables transformers passes to a chat template.
struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools (the template sees None)
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::string bos_token;                                             // empty: not defined
  std::string eos_token;
};

// {bos_token, eos_token, **kwargs, messages, tools, documents: None, add_generation_prompt}
// as transformers' apply_chat_template builds it.
nlohmann::ordered_json MakeChatContext(const ChatRequest& request);

// What a checkpoint's tokenizer_config.json says about chat formatting.
struct TokenizerChatConfig {
  std::string chat_template;  // the "default" one when the file lists several
  std::string bos_token;
  std::string eos_token;
};

// Reads MODEL_DIR/tokenizer_config.json. `chat_template` may be a string or a list of
// {name, template} (the entry named "default" is used); bos/eos may be strings or
// {"content": ...} objects. Errors name the file and field.
Result<TokenizerChatConfig> LoadTokenizerChatConfig(const std::string& model_dir);

// A model's chat format: its template with the checkpoint's bos / eos tokens. Render is the one
// function every request's prompt is rendered with: the server's chat routes (chat completions,
// Messages, Responses) and tokenize endpoints through ServedModel::RenderChat, `generate
// --chat`, `chat-template`, the benches and the tests' chat prompts.
struct ChatFormat {
  ChatTemplate tmpl;
  std::string bos_token;  // empty: not defined
  std::string eos_token;
  // `request` with its bos / eos tokens set from this format.
  Result<std::string> Render(ChatRequest request) const;
  // One user message (with `kwargs`, chat_template_kwargs) and the generation prompt.
  Result<std::string> RenderUser(
      const std::string& content,
      nlohmann::ordered_json kwargs = nlohmann::ordered_json::object()) const;
};

// MODEL_DIR/tokenizer_config.json's template and tokens (the file is optional; MODEL_DIR may be
// empty); a non-empty `template_file` (a Jinja file) replaces the template. nullopt: no template.
// Errors name the file (a parse error its line and column).
Result<std::optional<ChatFormat>> LoadChatFormat(const std::string& model_dir,
                                                 const std::string& template_file = "");

}  // namespace mx
