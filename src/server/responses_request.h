// OpenAI Responses request bodies (POST /v1/responses) -> the chat path's ParsedRequest. As
// for Anthropic's route, the body is translated at the edge into a chat body: `input` items
// (message with input_text / output_text, function_call, function_call_output, reasoning)
// become chat messages, `instructions` a system message, `previous_response_id` the stored
// conversation before them, function tools and tool_choice chat's, `max_output_tokens`
// max_tokens, `text.format` response_format (the structured-output engine) and
// `reasoning.effort` enable_thinking. What cannot be served (an image, a hosted tool) is a 400
// naming it; an unknown previous_response_id a 404 naming the id.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request_parse.h"
#include "server/response_store.h"

namespace mx::server {

// What the response object echoes and the store keeps, besides the ParsedRequest.
struct ResponsesContext {
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();         // request fields echoed
  nlohmann::ordered_json input_items = nlohmann::ordered_json::array();   // with ids
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();  // no instructions
  bool store = true;
};

// `store` is read for previous_response_id.
std::optional<ApiError> ParseResponsesRequest(const nlohmann::ordered_json& body,
                                              const RequestLimits& limits, ResponseStore& store,
                                              ParsedRequest* out, ResponsesContext* ctx);

// "Response with id 'ID' not found." as a 404.
ApiError ResponseNotFound(const std::string& id, std::string param = "");

}  // namespace mx::server
