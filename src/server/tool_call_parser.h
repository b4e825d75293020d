// GLM tool calls: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`
// (whitespace between the parts allowed; zero arguments is `<tool_call>NAME</tool_call>`) parsed
// into OpenAI tool calls whose `arguments` is a JSON object text.
//
// GLM writes every value as text (a string as it is, anything else as JSON); the declared
// tool's parameter schema types it back: "string" keeps the text, "integer" / "number" /
// "boolean" / "null" / "array" / "object" convert it (a value that does not convert stays a
// string); an untyped enum takes the member the text is (as JSON or raw); a key without a
// schema type becomes the JSON value when the text is JSON, else a string.
//
// Streaming and non-streaming share this one incremental parser, and a call is emitted whole
// when its `</tool_call>` arrives, so the calls and the text are the same however the output
// is cut into pieces (tool_call_parser_test checks every byte boundary). What is not a call is
// returned as content, counted by reason: a name the request's tools do not declare
// (unknown_tool), and markup that does not parse (malformed: a key without `<arg_value>`, stray
// text, an empty name, a call left open at the end of the output).
//
// Thread-safety: one parser per choice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx::server {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON object text
};

class ToolCallParser {
 public:
  // `tools`: the request's OpenAI tools array (names and argument types); null or empty: every
  // name is accepted and values are typed as JSON when they parse.
  explicit ToolCallParser(const nlohmann::ordered_json& tools);

  struct Out {
    std::string content;
    std::vector<ParsedToolCall> calls;
    int unknown_tools = 0;  // calls returned as content because their name is not declared
    int malformed = 0;      // calls returned as content because their markup does not parse
  };
  Out Push(std::string_view text);
  Out Finish();

 private:
  // A complete call's body (between the tags) into *call; false when it does not parse.
  bool ParseBody(std::string_view body, ParsedToolCall* call) const;
  // The declared tool's parameter properties, or null (not declared, or no properties).
  const nlohmann::ordered_json* Properties(const std::string& name) const;
  bool Declared(const std::string& name) const;

  nlohmann::ordered_json tools_;
  bool in_call_ = false;
  bool after_call_ = false;  // whitespace between and after calls is dropped
  std::string buf_;
};

// A GLM argument value typed by its property schema (see above).
nlohmann::ordered_json TypedArgument(const std::string& value,
                                     const nlohmann::ordered_json* schema);

}  // namespace mx::server
