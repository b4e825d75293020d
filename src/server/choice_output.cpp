// Per-choice output pipeline.
#include "server/choice_output.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

namespace mx::server {

bool IsParserMarker(std::string_view t) {
  return t == "<think>" || t == "</think>" || t == "<tool_call>" || t == "</tool_call>" ||
         t == "<arg_key>" || t == "</arg_key>" || t == "<arg_value>" || t == "</arg_value>";
}

void ChoiceDelta::Append(const ChoiceDelta& d) {
  reasoning += d.reasoning;
  content += d.content;
  tool_calls.insert(tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  token_ids.insert(token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  logprobs.insert(logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  if (d.finish_reason) finish_reason = d.finish_reason;
  if (!d.matched_stop.empty()) matched_stop = d.matched_stop;
  if (d.matched_stop_token) matched_stop_token = d.matched_stop_token;
}

ChoiceOutput::ChoiceOutput(const tok::Tokenizer& tokenizer, ChoiceOptions options)
    : tokenizer_(tokenizer),
      opts_(std::move(options)),
      detok_(tokenizer, /*skip_special_tokens=*/false) {
  if (opts_.split_reasoning) reasoning_.emplace(opts_.reasoning_starts_open);
  if (opts_.parse_tool_calls) tools_.emplace(opts_.tools);
  for (const auto& s : opts_.stop) max_stop_ = std::max(max_stop_, s.size());
}

namespace {

// Moves `pos` back to the start of a UTF-8 character.
size_t Utf8Boundary(const std::string& s, size_t pos) {
  while (pos > 0 && pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

std::string NewToolCallId() {
  static std::atomic<uint64_t> counter{0};
  uint64_t n = counter.fetch_add(1) + 1;
  uint64_t mixed = (n * 0x9E3779B97F4A7C15ull) ^ (reinterpret_cast<uintptr_t>(&counter) << 7);
  return fmt::format("call_{:016x}", mixed);
}

}  // namespace

void ChoiceOutput::Parse(std::string text, bool final, ChoiceDelta& d) {
  std::string content;
  if (reasoning_) {
    ReasoningParser::Out r = reasoning_->Push(text);
    d.reasoning += r.reasoning;
    content = std::move(r.content);
    if (final) {
      ReasoningParser::Out f = reasoning_->Finish();
      d.reasoning += f.reasoning;
      content += f.content;
    }
  } else {
    content = std::move(text);
  }
  if (tools_) {
    ToolCallParser::Out t = tools_->Push(content);
    if (final) {
      ToolCallParser::Out f = tools_->Finish();
      t.content += f.content;
      t.calls.insert(t.calls.end(), f.calls.begin(), f.calls.end());
    }
    d.content += t.content;
    for (auto& c : t.calls) {
      d.tool_calls.push_back(
          {next_tool_index_++, NewToolCallId(), std::move(c.name), std::move(c.arguments)});
    }
  } else {
    d.content += content;
  }
}

void ChoiceOutput::Route(std::string text, bool final, ChoiceDelta& d) {
  if (max_stop_ == 0) return Parse(std::move(text), final, d);
  held_ += text;
  // The earliest stop string in what is held.
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const auto& s : opts_.stop) {
    size_t p = held_.find(s);
    if (p != std::string::npos && p < best) {
      best = p;
      which = &s;
    }
  }
  if (which != nullptr) {
    std::string emit = held_.substr(0, best);
    held_.clear();
    d.matched_stop = *which;
    stopped_by_text_ = true;
    return Parse(std::move(emit), /*final=*/true, d);
  }
  if (final) {
    std::string emit = std::move(held_);
    held_.clear();
    return Parse(std::move(emit), true, d);
  }
  // Keep the last max_stop-1 bytes: they may begin a stop string.
  size_t keep_from = held_.size() > max_stop_ - 1 ? held_.size() - (max_stop_ - 1) : 0;
  keep_from = Utf8Boundary(held_, keep_from);
  std::string emit = held_.substr(0, keep_from);
  held_.erase(0, keep_from);
  Parse(std::move(emit), false, d);
}

ChoiceDelta ChoiceOutput::Push(const GenerationChunk& chunk) {
  ChoiceDelta d;
  if (finished_) return d;
  const bool last = chunk.finish != FinishReason::kNone;
  std::string text;
  for (size_t i = 0; i < chunk.tokens.size() && !stopped_by_text_; ++i) {
    const int32_t id = chunk.tokens[i];
    ++completion_tokens_;
    d.token_ids.push_back(id);
    if (i < chunk.logprobs.size()) {
      LogprobEntry e{id, chunk.logprobs[i].logprob, {}};
      if (i < chunk.top.size()) e.top = chunk.top[i];
      d.logprobs.push_back(std::move(e));
    }
    const bool is_stop_token =
        last && i + 1 == chunk.tokens.size() && chunk.finish == FinishReason::kStop &&
        chunk.matched_stop_token.has_value() && *chunk.matched_stop_token == id;
    if (is_stop_token) continue;
    if (opts_.skip_special_tokens && tokenizer_.IsSpecial(id) &&
        !IsParserMarker(tokenizer_.TokenText(id))) {
      continue;
    }
    std::string piece = detok_.Push(id);
    if (!piece.empty()) {
      text += piece;
      // A stop string seen mid-chunk ends the choice at this token.
      if (max_stop_ > 0) {
        Route(std::move(text), false, d);
        text.clear();
      }
    }
  }
  if (stopped_by_text_) {
    finished_ = true;
    d.finish_reason = "stop";
  } else if (last) {
    text += detok_.Finish();
    Route(std::move(text), /*final=*/true, d);
    finished_ = true;
    if (stopped_by_text_ || chunk.finish == FinishReason::kStop) {
      d.finish_reason = "stop";
    } else {
      d.finish_reason = chunk.finish == FinishReason::kLength ? "length" : "abort";
    }
    if (d.matched_stop.empty()) d.matched_stop = chunk.matched_stop;
    d.matched_stop_token = chunk.matched_stop_token;
  } else if (!text.empty()) {
    Route(std::move(text), false, d);
  }
  if (finished_ && *d.finish_reason == "stop" && tools_ &&
      (!total_.tool_calls.empty() || !d.tool_calls.empty())) {
    d.finish_reason = "tool_calls";
  }
  total_.Append(d);
  return d;
}

}  // namespace mx::server
