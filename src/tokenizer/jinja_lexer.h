// Jinja tokenizer, a transcription of jinja2.lexer's state machine for the environment
// Hugging Face uses (trim_blocks=True, lstrip_blocks=True, default delimiters): the same
// whitespace control (`{%-`, `-%}`, `{%+`, `+%}`), the same newline normalisation and
// trailing-newline removal, `{% raw %}`, comments, and brace balancing inside tags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mx::jinja {

enum class Tok : uint8_t {
  kData,        // template text (already whitespace-controlled)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // value already unescaped
  kInt,
  kFloat,
  kOp,  // text holds the operator ("==", "(", ...)
  kEof,
};

struct Token {
  Tok type;
  std::string text;
  int line = 1;
  int col = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Errors read "NAME:LINE:COL: message".
Result<std::vector<Token>> Lex(std::string_view source, std::string_view name,
                               const LexOptions& options = {});

}  // namespace mx::jinja
