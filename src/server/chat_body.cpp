// Typed reads and tools for the chat-body translations.
#include "server/chat_body.h"

#include <fmt/format.h>

namespace mx::server {

using Json = nlohmann::ordered_json;

std::optional<ApiError> RequireString(const Json& obj, const char* name, const std::string& p,
                                      std::string* out) {
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_string()) {
    return BadRequest(p + "." + name, fmt::format("'{}.{}' must be a string", p, name));
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ChatTools(const Json& tools, const ToolTypeCheck& check_type,
                                  const char* schema_key, bool schema_required, Json* out) {
  if (!tools.is_array()) return BadRequest("tools", "'tools' must be an array");
  *out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object()) return BadRequest(p, fmt::format("'{}' must be an object", p));
    if (auto e = check_type(t, p)) return e;
    std::string name;
    if (auto e = RequireString(t, "name", p, &name)) return e;
    Json fn{{"name", name}};
    if (auto d = t.find("description"); d != t.end() && d->is_string()) fn["description"] = *d;
    auto schema = t.find(schema_key);
    const bool given = schema != t.end() && !schema->is_null();
    if ((schema_required && !given) || (given && !schema->is_object())) {
      return BadRequest(p + "." + schema_key,
                        fmt::format("'{}.{}' must be an object", p, schema_key));
    }
    if (given) fn["parameters"] = *schema;
    out->push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return std::nullopt;
}

}  // namespace mx::server
