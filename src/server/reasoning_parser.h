// GLM reasoning split: text before `</think>` is reasoning_content, the rest is content. The
// GLM chat template opens `<think>` at the end of the prompt when thinking is on, so a stream
// may start inside the reasoning; a leading `<think>` in the output opens it too. Works on
// text pieces as they stream (with tool calls parsed, a `<tool_call>` also ends the reasoning): a
// piece that may be the start of a tag is held back until it is known, so the concatenation of
// outputs is the same however the text is split.
//
// Thread-safety: one parser per choice.
#pragma once

#include <string>
#include <string_view>

namespace mx::server {

class ReasoningParser {
 public:
  // end_on_tool_call: a `<tool_call>` inside the reasoning ends it (the call is content).
  explicit ReasoningParser(bool start_in_reasoning, bool end_on_tool_call = false);

  struct Out {
    std::string reasoning;
    std::string content;
  };
  Out Push(std::string_view text);
  Out Finish();  // flushes what is held back
  // True while the text pushed so far ends inside the reasoning.
  bool in_reasoning() const {
    return state_ == State::kReasoning || (state_ == State::kStart && open_);
  }

 private:
  enum class State { kStart, kReasoning, kContent };
  bool open_;  // the prompt left <think> open
  bool end_on_tool_call_;
  State state_ = State::kStart;
  std::string buf_;
};

// Length of the longest suffix of `text` that is a proper prefix of `tag` (held back while
// streaming because the next piece may complete the tag).
size_t PartialTagSuffix(std::string_view text, std::string_view tag);

// True when the rendered prompt leaves a `<think>` open (thinking on in GLM templates).
bool PromptOpensReasoning(std::string_view prompt);

}  // namespace mx::server
