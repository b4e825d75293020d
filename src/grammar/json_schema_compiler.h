// JSON Schema (the draft 2020-12 subset OpenAI structured outputs and XGrammar accept) and
// "any JSON object" -> grammar. Supported: type (one or a list), object with properties
// (in the order given), required, additionalProperties (false; or true / a schema when there
// are no properties), array with items, minItems, maxItems, string with enum, const,
// pattern, format (date-time, date, time, uuid, email), minLength, maxLength, number and
// integer with minimum, maximum, exclusiveMinimum, exclusiveMaximum, boolean, null, enum and
// const of any value, anyOf, oneOf (as anyOf), allOf of one schema, $ref to "#..." JSON
// pointers ($defs, definitions, recursion included). Annotations (title, description,
// default, examples, ...) are ignored. Any other keyword is an Unimplemented error naming it
// and where it is; nothing is silently dropped.
//
// Choices that make the language a subset of what the schema allows (output always validates;
// not every valid document is reachable): properties come in schema order; an object with
// properties and no additionalProperties allows no others (OpenAI strict); a pattern must
// match the whole string; dates skip 29 February; numbers with bounds are written without an
// exponent and, when fractional, with an integer part whose whole unit interval is in range;
// integer parts have at most 16 digits and exponents at most 2 (finite doubles, int64 integers).
// Whitespace between tokens is at most JsonOptions::max_whitespace bytes; none at the ends.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace mx::grammar {

struct JsonOptions {
  int32_t max_whitespace = 16;  // [ \t\n\r] bytes between two JSON tokens
  // Strings write `<` only as \u003c (JSON embedded in GLM tool-call markup, whose closing
  // tags start with `<`, stays unambiguous; the language is unchanged).
  bool escape_lt = false;
};

// Parses `schema_text` (nesting checked first against limits.max_depth) and compiles it.
Result<Grammar> JsonSchemaGrammar(std::string_view schema_text, const JsonOptions& opt = {},
                                  const GrammarLimits& limits = {});
// Any JSON object (response_format json_object).
Result<Grammar> JsonObjectGrammar(const JsonOptions& opt = {}, const GrammarLimits& limits = {});

// For grammars that embed a schema (tool calls): the element matching `schema`'s JSON, with
// `$ref`s resolved against `root` (the document `schema` is part of; null: `schema` itself).
Status CompileJsonSchema(GrammarBuilder& b, const nlohmann::ordered_json& schema,
                         const JsonOptions& opt, Elem* out,
                         const nlohmann::ordered_json* root = nullptr);

// The regular expression of a string `format` (date-time, date, time, uuid, email) over the
// string's content, or null when the format is not supported.
const std::string* JsonStringFormatRegex(std::string_view format);

}  // namespace mx::grammar
