// GLM tool calls: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`
// (whitespace between the parts allowed) parsed into OpenAI tool calls whose `arguments` is a
// JSON object text. A value becomes a JSON string when the tool's schema says "string" (or the
// value is not JSON), else the parsed JSON value (42, true, {"a": 1}). Streaming and
// non-streaming share this one incremental parser, so both give the same calls; a call is
// emitted whole when its `</tool_call>` arrives. An unterminated call at the end is returned
// as plain content.
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
  // `tools`: the request's OpenAI tools array (for argument types); may be null.
  explicit ToolCallParser(const nlohmann::ordered_json& tools);

  struct Out {
    std::string content;
    std::vector<ParsedToolCall> calls;
  };
  Out Push(std::string_view text);
  Out Finish();

 private:
  ParsedToolCall ParseBody(std::string_view body) const;

  nlohmann::ordered_json tools_;
  bool in_call_ = false;
  bool after_call_ = false;  // whitespace between and after calls is dropped
  std::string buf_;
};

}  // namespace mx::server
