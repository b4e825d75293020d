// OpenAI-style errors: {"error": {"message", "type", "param", "code"}} with the HTTP status they
// travel with. Every expected failure of a request (bad JSON, a wrong type, an out-of-range
// value, an unknown model, a full queue) becomes one of these; nothing on user input aborts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace mx::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null

  nlohmann::ordered_json ToJson() const;
  std::string Body() const;  // ToJson().dump()
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
