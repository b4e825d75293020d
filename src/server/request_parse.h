// OpenAI (/v1/chat/completions, /v1/completions) and sglang-native (/generate) request bodies
// -> native ParsedRequest. Validation happens here, at the edge: a wrong type, an
// out-of-range value or a missing field is a 400 naming the parameter; unknown fields are
// ignored. Tokenizing, templating and the context-window check happen later (they need the
// model), in the route handlers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "engine/engine.h"
#include "grammar/constraint.h"
#include "server/api_error.h"

namespace mx::server {

// kMessages (Anthropic) and kResponses (OpenAI Responses) are chats in another shape.
enum class ApiKind { kChat, kCompletion, kGenerate, kMessages, kResponses };
inline bool IsChatLike(ApiKind k) {
  return k == ApiKind::kChat || k == ApiKind::kMessages || k == ApiKind::kResponses;
}

// A prompt before tokenization: text or token ids.
using PromptInput = std::variant<std::string, std::vector<int32_t>>;

struct ParsedRequest {
  ApiKind kind = ApiKind::kChat;
  std::string model;  // "" = the default model
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  bool echo = false;                // completions
  bool skip_special_tokens = true;  // special tokens other than the think/tool markers
  bool max_tokens_given = false;    // else: completions 16, chat/generate: the rest of context
  bool separate_reasoning = true;   // chat: split <think>...</think> into reasoning_content
  std::string request_id;           // /generate "rid"
  bool seed_given = false;          // else each choice draws its own seed (gen.sampling.seed)
  GenerationRequest gen;            // prompt left empty; filled per prompt by the handler
  // Structured output (response_format, regex, ebnf, json_schema, guided_*), compiled by the
  // handler against the model's vocabulary; constraint_param names the field it came from.
  std::optional<grammar::ConstraintSpec> constraint;
  std::string constraint_param;

  // Completions / generate: one or more prompts (a batch gives one choice per prompt and n).
  std::vector<PromptInput> prompts;
  // Chat: messages as the template wants them (tool-call arguments parsed into objects).
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;     // null = none
  bool parse_tool_calls = false;    // tools given and tool_choice != "none"
  bool parallel_tool_calls = true;  // false: the output ends after its first tool call
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // At most this many tokens of reasoning (-1: no bound): chat's thinking_budget (and vLLM's
  // thinking_token_budget, sglang's custom_params.thinking_budget), Messages'
  // thinking.budget_tokens. The engine then ends the reasoning with `</think>` and the answer
  // follows (GenerationRequest::thinking_budget).
  int32_t thinking_budget = -1;
  // Responses' reasoning.effort, chat's reasoning_effort (low, medium, high, xhigh; none and
  // minimal turn thinking off at parse time): the handler maps it to a budget
  // (ServerOptions::effort_budgets) when no budget is given.
  std::string reasoning_effort;
};

// Upper bounds the server enforces on every request.
struct RequestLimits {
  int max_n = 16;
  int max_top_logprobs = kMaxTopLogprobs;  // engine/engine.h
  int max_stop = 16;
  int max_json_depth = 256;  // nesting of arrays and objects in a request body
};

// Each returns the error, or nullopt with `out` filled.
std::optional<ApiError> ParseChatRequest(const nlohmann::ordered_json& body,
                                         const RequestLimits& limits, ParsedRequest* out);
std::optional<ApiError> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                               const RequestLimits& limits, ParsedRequest* out);
std::optional<ApiError> ParseGenerateRequest(const nlohmann::ordered_json& body,
                                             const RequestLimits& limits, ParsedRequest* out);

// Parses a request body: malformed JSON, a non-object or nesting deeper than max_depth (checked
// by a scan of the bytes before anything is built) is a 400.
std::optional<ApiError> ParseBody(const std::string& text, nlohmann::ordered_json* out,
                                  int max_depth);

using mx::JsonNestingDepth;  // base/json_depth.h

}  // namespace mx::server
