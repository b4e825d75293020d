// One choice's output pipeline: engine chunks (tokens with the text the engine decoded once)
// -> the engine's stop-string trim -> reasoning split -> tool-call parse -> deltas. A streaming
// response sends the deltas as they come; a non-streaming response is the sum of the same deltas,
// so the two agree by construction.
//
// Special tokens: the think / tool-call markers always reach the parsers; other special tokens
// are dropped when skip_special_tokens is on, and the stop token that ended the request (EOS
// or a stop_token_id) is never shown.
//
// Thread-safety: one ChoiceOutput per choice, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

struct ChoiceOptions {
  bool skip_special_tokens = true;
  std::vector<std::string> stop;  // stop strings (text is cut before the first match)
  bool split_reasoning = false;
  bool reasoning_starts_open = false;  // the prompt ends inside <think>
  bool parse_tool_calls = false;
  nlohmann::ordered_json tools;
  // > 0: after this many tool calls the output is complete (parallel tool calls off): what
  // follows is dropped and the finish reason is tool_calls however the request ends.
  int max_tool_calls = 0;
  // Token ids (-1: none) by which reasoning tokens are counted (usage's reasoning_tokens): the
  // output is inside the reasoning from the start when reasoning_starts_open, or from a first
  // token think_start_token, until think_end_token or tool_call_token.
  int32_t think_start_token = -1;
  int32_t think_end_token = -1;
  int32_t tool_call_token = -1;
};

struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct LogprobEntry {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

struct ChoiceDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<int32_t> token_ids;
  std::vector<LogprobEntry> logprobs;
  std::optional<std::string> finish_reason;  // on the last delta
  std::string matched_stop;                  // the stop string that ended it, if any
  std::optional<int32_t> matched_stop_token;

  bool has_text() const { return !reasoning.empty() || !content.empty() || !tool_calls.empty(); }
  void Append(const ChoiceDelta& d);
};

class ChoiceOutput {
 public:
  ChoiceOutput(const tok::Tokenizer& tokenizer, ChoiceOptions options);

  // Feeds one engine chunk. After the delta with a finish_reason, the choice is finished and
  // further chunks are ignored. Stop strings are the engine's decision (its stop matcher
  // reports the string and the bytes to trim on the last chunk); this only holds back the
  // text a stop string could still begin with, and trims what the engine says.
  ChoiceDelta Push(const GenerationChunk& chunk);
  bool finished() const { return finished_; }
  // True once max_tool_calls calls were parsed: the caller may end the request.
  bool tool_calls_complete() const {
    return opts_.max_tool_calls > 0 && next_tool_index_ >= opts_.max_tool_calls;
  }
  // True while the output so far ends inside the reasoning (a thinking budget may close it).
  bool in_reasoning() const { return reasoning_ && reasoning_->in_reasoning(); }

  const ChoiceDelta& total() const { return total_; }
  int32_t completion_tokens() const { return completion_tokens_; }
  int32_t reasoning_tokens() const { return reasoning_tokens_; }
  // Tool-call markup returned as content (tool_call_parser.h says why).
  int unknown_tool_calls() const { return unknown_tool_calls_; }
  int malformed_tool_calls() const { return malformed_tool_calls_; }

 private:
  // Decoded text waits in held_ (with a shown / hidden flag per byte) until no stop string
  // can cut it; Release passes the first n bytes' shown text to Parse.
  void Hold(const std::string& piece, bool visible);
  void Release(size_t n, bool final, ChoiceDelta& d);
  void ReleaseSafe(ChoiceDelta& d);
  void ReleaseFinal(const GenerationChunk& last, ChoiceDelta& d);
  // Text through the reasoning and tool parsers into `d`. `final` flushes.
  void Parse(std::string text, bool final, ChoiceDelta& d);

  const tok::Tokenizer& tokenizer_;
  ChoiceOptions opts_;
  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
  std::string held_;          // decoded text not yet released: a stop string may cut it
  std::string held_visible_;  // per byte of held_: 1 shown, 0 a skipped special token
  size_t max_stop_ = 0;
  bool finished_ = false;
  int next_tool_index_ = 0;
  int32_t completion_tokens_ = 0;
  int32_t reasoning_tokens_ = 0;
  bool counting_reasoning_ = false;
  int unknown_tool_calls_ = 0;
  int malformed_tool_calls_ = 0;
  ChoiceDelta total_;
};

// True for the markers the reasoning and tool-call parsers need to see.
bool IsParserMarker(std::string_view token_text);

}  // namespace mx::server
