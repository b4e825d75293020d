// Anthropic Messages request bodies (/v1/messages, /v1/messages/count_tokens) -> the chat
// path's ParsedRequest. The body is translated at the edge into the OpenAI chat shape the chat
// route parses (system -> a system message, tool_use blocks -> tool_calls, tool_result blocks
// -> tool messages, thinking blocks -> reasoning_content, tools' input_schema -> parameters,
// tool_choice any/tool/none -> required/function/none with disable_parallel_tool_use ->
// parallel_tool_calls, stop_sequences -> stop, thinking -> enable_thinking, output_format ->
// response_format), so that both APIs share one validation, template, sampling, structured
// output and tool-call path. A block type the server cannot serve (image, document, a server
// tool) is a 400 naming it.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request_parse.h"

namespace mx::server {

// The OpenAI chat body equivalent to an Anthropic Messages body. `count_tokens`: max_tokens is
// not required (/v1/messages/count_tokens).
std::optional<ApiError> AnthropicToChatBody(const nlohmann::ordered_json& body,
                                            const RequestLimits& limits, bool count_tokens,
                                            nlohmann::ordered_json* chat);

// AnthropicToChatBody then ParseChatRequest; out->kind is kMessages.
std::optional<ApiError> ParseMessagesRequest(const nlohmann::ordered_json& body,
                                             const RequestLimits& limits, bool count_tokens,
                                             ParsedRequest* out);

}  // namespace mx::server
