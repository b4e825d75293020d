// JSON shapes of responses: OpenAI chat/completion objects and chunks, usage, logprobs, and
// the SSE framing around them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/choice_output.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

// "data: JSON\n\n"
std::string SseEvent(const nlohmann::ordered_json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// "event: NAME\ndata: JSON\n\n" (the Anthropic and Responses streams name their events)
std::string NamedSseEvent(const std::string& name, const nlohmann::ordered_json& data);

nlohmann::ordered_json UsageJson(int64_t prompt_tokens, int64_t completion_tokens,
                                 int64_t cached_tokens, int64_t reasoning_tokens = 0);

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
nlohmann::ordered_json ChatLogprobs(const tok::Tokenizer& tokenizer,
                                    const std::vector<LogprobEntry>& entries);
// Completion logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
// `text_offset` starts at *offset and advances it.
nlohmann::ordered_json CompletionLogprobs(const tok::Tokenizer& tokenizer,
                                          const std::vector<LogprobEntry>& entries,
                                          int64_t* offset);

// OpenAI tool_calls; `streaming` adds each call's "index".
nlohmann::ordered_json ToolCallsJson(const std::vector<ToolCallDelta>& calls, bool streaming);

}  // namespace mx::server
