// tokenizer_config.json (+ chat_template.jinja) fields the server needs beside tokenizer.json:
// the chat template text and the bos/eos/pad token strings. Absent files are not errors.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mx::tok {

struct TokenizerConfig {
  std::string path;      // tokenizer_config.json that was read; empty if there was none
  std::string raw_json;  // its full text, for fields not parsed here
  // The default chat template: tokenizer_config.json "chat_template" (a string, or the entry
  // named "default" in a list of {name, template}), else MODEL_DIR/chat_template.jinja.
  std::optional<std::string> chat_template;
  std::string chat_template_source;                         // file it came from
  std::map<std::string, std::string> named_chat_templates;  // every named template
  // Token strings; a {"content": ...} object is reduced to its content.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;

  // Reads MODEL_DIR/tokenizer_config.json and MODEL_DIR/chat_template.jinja when present.
  static Result<TokenizerConfig> Load(const std::string& model_dir);
  // Parses tokenizer_config.json text; `path` is used in error messages.
  static Result<TokenizerConfig> FromJson(std::string_view json_text, const std::string& path);
};

}  // namespace mx::tok
