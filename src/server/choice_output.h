// One choice's output pipeline: engine token chunks -> streaming detokenizer -> stop-string
// filter -> reasoning split -> tool-call parse -> deltas. A streaming response sends the
// deltas as they come; a non-streaming response is the sum of the same deltas, so the two
// agree by construction.
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
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

struct ChoiceOptions {
  bool skip_special_tokens = true;
  std::vector<std::string> stop;  // stop strings (text is cut before the first match)
  bool split_reasoning = false;
  bool reasoning_starts_open = false;  // the prompt ends inside <think>
  bool parse_tool_calls = false;
  nlohmann::ordered_json tools;
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
  // further chunks are ignored. A stop string found in the text finishes the choice with
  // "stop" even before the engine does (the caller then aborts the engine request).
  ChoiceDelta Push(const GenerationChunk& chunk);
  bool finished() const { return finished_; }
  // True when the text matched a stop string that the engine has not reported yet.
  bool stopped_by_text() const { return stopped_by_text_; }

  const ChoiceDelta& total() const { return total_; }
  int32_t completion_tokens() const { return completion_tokens_; }

 private:
  // Text through stop filter, reasoning and tool parsers into `d`. `final` flushes.
  void Route(std::string text, bool final, ChoiceDelta& d);
  void Parse(std::string text, bool final, ChoiceDelta& d);

  const tok::Tokenizer& tokenizer_;
  ChoiceOptions opts_;
  tok::StreamingDetokenizer detok_;
  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
  std::string held_;  // text held back: it may start a stop string
  size_t max_stop_ = 0;
  bool finished_ = false;
  bool stopped_by_text_ = false;
  int next_tool_index_ = 0;
  int32_t completion_tokens_ = 0;
  ChoiceDelta total_;
};

// True for the markers the reasoning and tool-call parsers need to see.
bool IsParserMarker(std::string_view token_text);

}  // namespace mx::server
