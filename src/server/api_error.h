// OpenAI-style errors: {"error": {"message", "type", "param", "code"}} with the HTTP status they
// travel with. Every expected failure of a request (bad JSON, a wrong type, an out-of-range
// value, an unknown model, a full queue) becomes one of these; nothing on user input aborts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace mx::server {

// Which API's error body: OpenAI's {"error": {"message", "type", "param", "code"}} or
// Anthropic's {"type": "error", "error": {"type", "message"}} (its own types, 503 as 529).
enum class ErrorShape { kOpenAI, kAnthropic };

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null

  nlohmann::ordered_json ToJson(ErrorShape shape = ErrorShape::kOpenAI) const;
  std::string Body(ErrorShape shape = ErrorShape::kOpenAI) const;  // ToJson(shape).dump()
  // The status the error travels with in `shape`.
  int StatusIn(ErrorShape shape) const;
};

ApiError BadRequest(std::string param, std::string message);
ApiError NotFoundError(std::string param, std::string message, std::string code);
// Maps an engine / tokenizer Status: InvalidArgument -> 400, ResourceExhausted -> 429,
// NotFound -> 404, Unavailable -> 503, anything else -> 500.
ApiError FromStatus(const Status& status, std::string param = "");

// dump() that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string Dump(const nlohmann::ordered_json& j);
std::string Dump(const nlohmann::json& j);

}  // namespace mx::server
