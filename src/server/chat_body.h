// Helpers for the routes whose bodies are translated into a chat body at the edge (Anthropic
// Messages, OpenAI Responses): typed reads that name the parameter, and a function tool in
// chat's shape.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace mx::server {

// obj[name] as a string, or a 400 naming "P.NAME".
std::optional<ApiError> RequireString(const nlohmann::ordered_json& obj, const char* name,
                                      const std::string& p, std::string* out);

// Chat tools ({"type": "function", "function": {name, description, parameters}}) from an
// API's tools array: each tool must be an object that `check_type` accepts (given the tool
// and its parameter "tools[i]"), whose schema is tool[schema_key] (`schema_required`: a
// missing schema is a 400).
using ToolTypeCheck = std::function<std::optional<ApiError>(const nlohmann::ordered_json& tool,
                                                            const std::string& param)>;
std::optional<ApiError> ChatTools(const nlohmann::ordered_json& tools,
                                  const ToolTypeCheck& check_type, const char* schema_key,
                                  bool schema_required, nlohmann::ordered_json* out);

}  // namespace mx::server
