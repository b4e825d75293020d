// Server-sent events as OpenAI-compatible servers stream them: "data: {json}" lines, blank
// lines between events, ": comment" lines, and a final "data: [DONE]". SseParser splits a byte
// stream that arrives in arbitrary pieces into data payloads; ParseStreamChunk turns one payload
// into the fields a benchmark needs. Malformed input is reported, never thrown.
//
// Three stream shapes are understood, told apart by the payload itself:
//   chat/completions chunks ("choices", "usage"), ended by [DONE];
//   Anthropic Messages events ("type": message_start, content_block_delta with text_delta or
//     thinking_delta, message_delta, message_stop = the end, error), whose usage splits the
//     prompt into input_tokens + cache_read_input_tokens + cache_creation_input_tokens;
//   OpenAI Responses events ("type": response.output_text.delta, response.reasoning_text.delta,
//     response.reasoning_summary_text.delta, response.completed / response.incomplete = the
//     end with response.usage, response.failed and error).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mx::loadgen {

class SseParser {
 public:
  // Appends bytes; returns the data payloads of every line completed by them (CRLF or LF).
  std::vector<std::string> Feed(std::string_view bytes);
  // Bytes of an unfinished line (a stream that ends with them was cut).
  bool has_partial_line() const { return !buf_.empty(); }

 private:
  std::string buf_;
};

// A piece of a streamed tool call: the call at `index` gets its id and name once and its
// arguments (JSON text) in pieces. Chat: delta.tool_calls[]; Messages: a tool_use
// content_block_start, then input_json_delta; Responses: a function_call output_item.added,
// then response.function_call_arguments.delta.
struct ToolCallPiece {
  int index = 0;
  std::string id, name, arguments;
};

struct StreamChunk {
  bool done = false;         // the [DONE] sentinel
  bool has_choices = false;  // a non-empty "choices" array
  std::string text;          // completions text, or chat delta content + reasoning content
  std::string reasoning;     // the reasoning part of `text` (it leads `text`)
  std::vector<ToolCallPiece> tool_calls;
  std::optional<int> prompt_tokens, completion_tokens, cached_tokens;  // from "usage"
  std::string error;  // an {"error": ...} object's message
};

// nullopt when `payload` is neither [DONE] nor a JSON object.
std::optional<StreamChunk> ParseStreamChunk(std::string_view payload);

}  // namespace mx::loadgen
