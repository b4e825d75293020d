// Jinja parser: tokens (jinja_lexer.h) -> syntax tree (jinja_ast.h), following
// jinja2.parser's grammar and operator precedence (filters bind tighter than arithmetic,
// `-x|f` is `(-x)|f`, `a if c` without else yields undefined, `**` is left-associative).
// Statements: if/elif/else, for (targets, `if` filter, else), set (expression, namespace
// attribute, block), macro, filter blocks, with, break/continue (loopcontrols).
#pragma once

#include <string_view>

#include "base/status.h"
#include "tokenizer/jinja_ast.h"

namespace mx::jinja {

// The most nested brackets/blocks a template may have; deeper input is rejected rather
// than risking the stack.
inline constexpr int kMaxParseDepth = 100;

// Errors read "NAME:LINE:COL: message".
Result<std::unique_ptr<Template>> ParseTemplate(std::string_view source, std::string_view name);

}  // namespace mx::jinja
