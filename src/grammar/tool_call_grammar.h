// Forced tool calls (OpenAI tool_choice "required" or a named function) as a grammar over
// GLM's tool-call markup, the form the chat template renders and the server's tool-call
// parser reads back:
//
//   <tool_call>NAME
//   <arg_key>KEY</arg_key>
//   <arg_value>VALUE</arg_value>
//   ...
//   </tool_call>
//
// NAME is one of the tools (or the named one); the keys are the function's parameter
// properties in schema order, the required ones always, the others optionally; a VALUE is
// the property's JSON (compiled from its schema, `$ref`s resolved in the parameters object),
// except for a property whose type is exactly "string": the parser takes that value as raw
// text, so the grammar writes raw text too (enum/const, pattern, format, minLength and
// maxLength honoured). Choices that keep the output parseable: raw text never contains `<`
// (a `</arg_value>` inside would end the value early) and JSON strings write `<` as \u003c;
// a function whose parameters are not an object of properties takes no arguments unless its
// schema says otherwise (then an Unimplemented error names the keyword). "required" allows
// one or more calls (one when parallel is false), a named function exactly one; an optional
// newline may come first.
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema_compiler.h"

namespace mx::grammar {

// spec: {"tools": [OpenAI tools], "name": "NAME" | null (null: any of them), "parallel": bool
// (optional, default true: with no name, one or more calls), "after_open": bool (optional,
// default false: true is the rest of one call after its `<tool_call>`, NAME first, complete at
// its `</tool_call>`, each newline above optional: what tool_choice auto constrains once the
// model opens a call)}.
Result<Grammar> ToolCallGrammar(const nlohmann::ordered_json& spec, const JsonOptions& opt,
                                const GrammarLimits& limits);

// The markup's tags, which a tokenizer may hold as special tokens: a vocabulary for tool-call
// grammars lets exactly these through (vocab_tokenizer.h).
inline constexpr const char* kToolCallTags[] = {"<tool_call>", "</tool_call>", "<arg_key>",
                                                "</arg_key>",  "<arg_value>",  "</arg_value>"};

}  // namespace mx::grammar
