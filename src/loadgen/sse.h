// Server-sent events as OpenAI-compatible servers stream them: "data: {json}" lines, blank
// lines between events, ": comment" lines, and a final "data: [DONE]". SseParser splits a byte
// stream that arrives in arbitrary pieces into data payloads; ParseStreamChunk turns one payload
// into the fields a benchmark needs. Malformed input is reported, never thrown.
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

struct StreamChunk {
  bool done = false;         // the [DONE] sentinel
  bool has_choices = false;  // a non-empty "choices" array
  std::string text;          // completions text, or chat delta content + reasoning content
  std::optional<int> prompt_tokens, completion_tokens, cached_tokens;  // from "usage"
  std::string error;  // an {"error": ...} object's message
};

// nullopt when `payload` is neither [DONE] nor a JSON object.
std::optional<StreamChunk> ParseStreamChunk(std::string_view payload);

}  // namespace mx::loadgen
