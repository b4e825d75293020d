// Streaming <think>...</think> splitter (GLM-4.5+ reasoning format).
#include "server/reasoning_parser.h"

#include <algorithm>

namespace mx::server {

namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>";
}  // namespace

size_t PartialTagSuffix(std::string_view text, std::string_view tag) {
  const size_t max = std::min(text.size(), tag.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

bool PromptOpensReasoning(std::string_view prompt) {
  size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ReasoningParser::ReasoningParser(bool start_in_reasoning, bool end_on_tool_call)
    : open_(start_in_reasoning), end_on_tool_call_(end_on_tool_call) {}

ReasoningParser::Out ReasoningParser::Push(std::string_view text) {
  Out out;
  buf_.append(text);
  while (!buf_.empty()) {
    if (state_ == State::kStart) {
      if (buf_.size() < kThinkOpen.size() && kThinkOpen.substr(0, buf_.size()) == buf_) return out;
      if (buf_.compare(0, kThinkOpen.size(), kThinkOpen) == 0) {
        buf_.erase(0, kThinkOpen.size());
        state_ = State::kReasoning;
      } else {
        state_ = open_ ? State::kReasoning : State::kContent;
      }
    } else if (state_ == State::kReasoning) {
      const size_t close = buf_.find(kThinkClose);
      // note: a model may open a tool call without closing its reasoning; the call ends the
      // reasoning and is the answer's (the tool-call parser reads it).
      const size_t call = end_on_tool_call_ ? buf_.find(kToolCallOpen) : std::string::npos;
      if (call != std::string::npos && (close == std::string::npos || call < close)) {
        out.reasoning.append(buf_, 0, call);
        buf_.erase(0, call);
        state_ = State::kContent;
      } else if (close != std::string::npos) {
        out.reasoning.append(buf_, 0, close);
        buf_.erase(0, close + kThinkClose.size());
        state_ = State::kContent;
      } else {
        size_t keep = PartialTagSuffix(buf_, kThinkClose);
        if (end_on_tool_call_) keep = std::max(keep, PartialTagSuffix(buf_, kToolCallOpen));
        out.reasoning.append(buf_, 0, buf_.size() - keep);
        buf_.erase(0, buf_.size() - keep);
        return out;
      }
    } else {
      out.content += buf_;
      buf_.clear();
    }
  }
  return out;
}

ReasoningParser::Out ReasoningParser::Finish() {
  Out out;
  if (state_ == State::kReasoning || (state_ == State::kStart && open_)) {
    out.reasoning = std::move(buf_);
  } else {
    out.content = std::move(buf_);
  }
  buf_.clear();
  return out;
}

}  // namespace mx::server
