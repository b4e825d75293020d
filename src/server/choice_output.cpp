// Per-choice output pipeline.
#include "server/choice_output.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "base/check.h"

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
    : tokenizer_(tokenizer), opts_(std::move(options)) {
  if (opts_.split_reasoning) {
    reasoning_.emplace(opts_.reasoning_starts_open, /*end_on_tool_call=*/opts_.parse_tool_calls);
  }
  counting_reasoning_ = opts_.think_end_token >= 0 && opts_.reasoning_starts_open;
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
  if (tool_calls_complete()) return;
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
    auto emit = [&](ToolCallParser::Out t) {
      d.content += t.content;
      unknown_tool_calls_ += t.unknown_tools;
      malformed_tool_calls_ += t.malformed;
      for (auto& c : t.calls) {
        if (tool_calls_complete()) break;
        d.tool_calls.push_back(
            {next_tool_index_++, NewToolCallId(), std::move(c.name), std::move(c.arguments)});
      }
    };
    // With a bound on the calls, text goes in up to each `</tool_call>` (one token in GLM's
    // vocabulary), so that nothing after the last call allowed is read.
    constexpr std::string_view kClose = "</tool_call>";
    std::string_view rest = content;
    while (!rest.empty() && !tool_calls_complete()) {
      const size_t cut = opts_.max_tool_calls > 0 ? rest.find(kClose) : std::string_view::npos;
      const size_t n = cut == std::string_view::npos ? rest.size() : cut + kClose.size();
      emit(tools_->Push(rest.substr(0, n)));
      rest.remove_prefix(n);
    }
    if (final && !tool_calls_complete()) emit(tools_->Finish());
  } else {
    d.content += content;
  }
}

void ChoiceOutput::Hold(const std::string& piece, bool visible) {
  held_ += piece;
  held_visible_.append(piece.size(), visible ? 1 : 0);
}

void ChoiceOutput::Release(size_t n, bool final, ChoiceDelta& d) {
  std::string emit;
  emit.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (held_visible_[i]) emit += held_[i];
  }
  held_.erase(0, n);
  held_visible_.erase(0, n);
  Parse(std::move(emit), final, d);
}

void ChoiceOutput::ReleaseSafe(ChoiceDelta& d) {
  // The engine reports a stop string on the token that completes it, and a match starts at
  // most max_stop - 1 bytes before that token's text: keep those back until the next chunk.
  size_t keep_from = held_.size() > max_stop_ - 1 ? held_.size() - (max_stop_ - 1) : 0;
  keep_from = Utf8Boundary(held_, keep_from);
  if (keep_from > 0) Release(keep_from, /*final=*/false, d);
}

void ChoiceOutput::ReleaseFinal(const GenerationChunk& chunk, ChoiceDelta& d) {
  if (!chunk.matched_stop.empty()) {
    // The engine's trim counts bytes of the text it sent, whose tail is still held here.
    const size_t trim = static_cast<size_t>(std::max(chunk.stop_trim_bytes, 0));
    held_.resize(held_.size() - std::min(held_.size(), trim));
    held_visible_.resize(held_.size());
  } else {
    Hold(chunk.text_tail, true);
  }
  Release(held_.size(), /*final=*/true, d);
}

ChoiceDelta ChoiceOutput::Push(const GenerationChunk& chunk) {
  ChoiceDelta d;
  if (finished_) return d;
  const bool last = chunk.finish != FinishReason::kNone;
  // The engine decodes each request once and sends the text (engine.h GenerationChunk).
  MX_CHECK_MSG(chunk.text.size() == chunk.tokens.size(),
               "the engine sent tokens without their text: it was created without a tokenizer");
  for (size_t i = 0; i < chunk.tokens.size(); ++i) {
    const int32_t id = chunk.tokens[i];
    ++completion_tokens_;
    if (counting_reasoning_) {
      if (id == opts_.think_end_token || id == opts_.tool_call_token) {
        counting_reasoning_ = false;
      } else {
        ++reasoning_tokens_;
      }
    } else if (completion_tokens_ == 1 && id == opts_.think_start_token && id >= 0) {
      counting_reasoning_ = opts_.think_end_token >= 0;
    }
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
    // A skipped special token's text is held (a stop trim counts its bytes) but never shown.
    const std::string& piece = chunk.text[i];
    const bool hidden = opts_.skip_special_tokens && tokenizer_.IsSpecial(id) &&
                        !IsParserMarker(tokenizer_.TokenText(id));
    if (hidden) {
      // Only the token's own text is hidden, not a pending character it flushed.
      const std::string_view own = tokenizer_.TokenText(id);
      const size_t lead = piece.ends_with(own) ? piece.size() - own.size() : 0;
      Hold(piece.substr(0, lead), true);
      Hold(piece.substr(lead), false);
    } else {
      Hold(piece, true);
    }
  }
  if (last) {
    ReleaseFinal(chunk, d);
    finished_ = true;
    if (chunk.finish == FinishReason::kStop) {
      d.finish_reason = "stop";
    } else {
      d.finish_reason = chunk.finish == FinishReason::kLength ? "length" : "abort";
    }
    d.matched_stop = chunk.matched_stop;
    d.matched_stop_token = chunk.matched_stop_token;
  } else if (max_stop_ > 0) {
    ReleaseSafe(d);
  } else {
    Release(held_.size(), /*final=*/false, d);
  }
  if (finished_ && tools_ &&
      (tool_calls_complete() ||
       (*d.finish_reason == "stop" && (!total_.tool_calls.empty() || !d.tool_calls.empty())))) {
    d.finish_reason = "tool_calls";
  }
  total_.Append(d);
  return d;
}

}  // namespace mx::server
