// OpenAI-style error bodies and the Status -> HTTP status mapping.
#include "server/api_error.h"

namespace mx::server {

namespace {

const char* AnthropicType(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

}  // namespace

int ApiError::StatusIn(ErrorShape shape) const {
  return shape == ErrorShape::kAnthropic && http_status == 503 ? 529 : http_status;
}

nlohmann::ordered_json ApiError::ToJson(ErrorShape shape) const {
  if (shape == ErrorShape::kAnthropic) {
    return {{"type", "error"},
            {"error", {{"type", AnthropicType(http_status)}, {"message", message}}}};
  }
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param);
  e["code"] = code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code);
  nlohmann::ordered_json body;
  body["error"] = std::move(e);
  return body;
}

std::string ApiError::Body(ErrorShape shape) const { return Dump(ToJson(shape)); }

ApiError BadRequest(std::string param, std::string message) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError NotFoundError(std::string param, std::string message, std::string code) {
  ApiError e;
  e.http_status = 404;
  e.type = "invalid_request_error";
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError FromStatus(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message();
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      e.param.clear();
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      e.param.clear();
      break;
    default:
      e.http_status = 500;
      e.type = "internal_server_error";
      e.param.clear();
      break;
  }
  return e;
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mx::server
