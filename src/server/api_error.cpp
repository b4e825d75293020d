// OpenAI-style error bodies and the Status -> HTTP status mapping.
#include "server/api_error.h"

namespace mx::server {

nlohmann::ordered_json ApiError::ToJson() const {
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param);
  e["code"] = code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code);
  nlohmann::ordered_json body;
  body["error"] = std::move(e);
  return body;
}

std::string ApiError::Body() const { return Dump(ToJson()); }

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
