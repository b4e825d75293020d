// Incremental GLM tool-call parser.
#include "server/tool_call_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/strings.h"
#include "server/api_error.h"
#include "server/reasoning_parser.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kToolOpen = "<tool_call>";
constexpr std::string_view kToolClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValOpen = "<arg_value>";
constexpr std::string_view kValClose = "</arg_value>";
constexpr const char* kToolSpace = " \t\r\n";

// GLM's separators: a Trim over all four.
std::string_view TrimSpace(std::string_view s) { return Trim(s, kToolSpace); }

bool IsSpace(std::string_view s) { return TrimSpace(s).empty(); }

void SkipToolSpace(std::string_view s, size_t* pos) {
  while (*pos < s.size() && std::strchr(kToolSpace, s[*pos]) != nullptr) ++*pos;
}

// The JSON types a property schema allows: "type" (a string or a list), else those of the
// anyOf / oneOf members.
std::vector<std::string> SchemaTypes(const Json* schema) {
  std::vector<std::string> out;
  if (schema == nullptr || !schema->is_object()) return out;
  if (auto t = schema->find("type"); t != schema->end()) {
    if (t->is_string()) out.push_back(t->get<std::string>());
    if (t->is_array()) {
      for (const Json& x : *t) {
        if (x.is_string()) out.push_back(x.get<std::string>());
      }
    }
    return out;
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    if (auto a = schema->find(k); a != schema->end() && a->is_array()) {
      for (const Json& member : *a) {
        for (std::string& t : SchemaTypes(&member)) out.push_back(std::move(t));
      }
    }
  }
  return out;
}

std::string ToolLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Json TypedArgument(const std::string& value, const Json* schema) {
  const std::vector<std::string> types = SchemaTypes(schema);
  auto allows = [&](const char* t) {
    return std::find(types.begin(), types.end(), t) != types.end();
  };
  const std::string_view trimmed = TrimSpace(value);
  const std::string lower = ToolLower(trimmed);
  if (allows("null") && (lower == "null" || lower == "none")) return nullptr;
  if (allows("string")) return value;
  const Json parsed = Json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
  for (const std::string& t : types) {
    if (t == "integer" && parsed.is_number_integer()) return parsed;
    if (t == "integer" && parsed.is_number_float()) {
      const double d = parsed.get<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d))) return static_cast<int64_t>(d);
    }
    if (t == "number" && parsed.is_number()) return parsed;
    if (t == "boolean" && (lower == "true" || lower == "false")) return lower == "true";
    if (t == "array" && parsed.is_array()) return parsed;
    if (t == "object" && parsed.is_object()) return parsed;
  }
  if (types.empty() && schema != nullptr && schema->is_object() && schema->contains("enum") &&
      (*schema)["enum"].is_array()) {
    // An untyped enum: the member the text is, as JSON (the forced grammar's form) or raw
    // (the template's form for a string).
    const Json& e = (*schema)["enum"];
    if (!parsed.is_discarded() && std::find(e.begin(), e.end(), parsed) != e.end()) return parsed;
    if (std::find(e.begin(), e.end(), Json(value)) != e.end()) return value;
  }
  if (types.empty() && !parsed.is_discarded()) return parsed;
  return value;  // not what the schema says: the text as the model wrote it
}

ToolCallParser::ToolCallParser(const Json& tools) : tools_(tools) {}

bool ToolCallParser::Declared(const std::string& name) const {
  if (!tools_.is_array() || tools_.empty()) return true;
  return std::any_of(tools_.begin(), tools_.end(), [&](const Json& t) {
    return t.is_object() && t.contains("function") && t["function"].is_object() &&
           t["function"].value("name", "") == name;
  });
}

const Json* ToolCallParser::Properties(const std::string& name) const {
  if (!tools_.is_array()) return nullptr;
  for (const auto& t : tools_) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const auto& fn = t["function"];
    if (fn.value("name", "") != name) continue;
    if (fn.contains("parameters") && fn["parameters"].is_object() &&
        fn["parameters"].contains("properties") && fn["parameters"]["properties"].is_object()) {
      return &fn["parameters"]["properties"];
    }
    return nullptr;
  }
  return nullptr;
}

bool ToolCallParser::ParseBody(std::string_view body, ParsedToolCall* call) const {
  size_t pos = body.find('<');
  const std::string_view name = TrimSpace(body.substr(0, pos));
  if (name.empty() || name.find_first_of(kToolSpace) != std::string_view::npos) return false;
  call->name = std::string(name);
  const Json* props = Properties(call->name);
  Json args = Json::object();
  while (pos != std::string_view::npos) {
    SkipToolSpace(body, &pos);
    if (pos >= body.size()) break;
    if (body.substr(pos, kKeyOpen.size()) != kKeyOpen) return false;
    pos += kKeyOpen.size();
    const size_t kend = body.find(kKeyClose, pos);
    if (kend == std::string_view::npos) return false;
    const std::string key(TrimSpace(body.substr(pos, kend - pos)));
    if (key.empty() || key.find('<') != std::string::npos) return false;
    pos = kend + kKeyClose.size();
    SkipToolSpace(body, &pos);
    if (body.substr(pos, kValOpen.size()) != kValOpen) return false;  // a missing <arg_value>
    pos += kValOpen.size();
    const size_t vend = body.find(kValClose, pos);
    if (vend == std::string_view::npos) return false;
    const std::string value(body.substr(pos, vend - pos));
    const Json* schema = nullptr;
    if (props != nullptr && props->contains(key)) schema = &(*props)[key];
    args[key] = TypedArgument(value, schema);
    pos = vend + kValClose.size();
  }
  call->arguments = Dump(args);
  return true;
}

ToolCallParser::Out ToolCallParser::Push(std::string_view text) {
  Out out;
  buf_.append(text);
  while (!buf_.empty()) {
    if (in_call_) {
      size_t close = buf_.find(kToolClose);
      if (close == std::string::npos) return out;
      const std::string_view body = std::string_view(buf_).substr(0, close);
      ParsedToolCall call;
      const bool parsed = ParseBody(body, &call);
      if (parsed && Declared(call.name)) {
        out.calls.push_back(std::move(call));
        after_call_ = true;
      } else {
        // Not a call: the markup as the model wrote it.
        (parsed ? out.unknown_tools : out.malformed) += 1;
        out.content.append(kToolOpen).append(body).append(kToolClose);
        after_call_ = false;
      }
      buf_.erase(0, close + kToolClose.size());
      in_call_ = false;
      continue;
    }
    size_t open = buf_.find(kToolOpen);
    if (open != std::string::npos) {
      std::string_view before = std::string_view(buf_).substr(0, open);
      if (!(after_call_ && IsSpace(before))) out.content.append(before);
      buf_.erase(0, open + kToolOpen.size());
      in_call_ = true;
      continue;
    }
    size_t keep = PartialTagSuffix(buf_, kToolOpen);
    std::string_view emit = std::string_view(buf_).substr(0, buf_.size() - keep);
    if (after_call_ && IsSpace(emit)) {
      return out;  // hold whitespace after a call until we know what follows
    }
    out.content.append(emit);
    after_call_ = false;
    buf_.erase(0, buf_.size() - keep);
    return out;
  }
  return out;
}

ToolCallParser::Out ToolCallParser::Finish() {
  Out out;
  if (in_call_) {
    out.content = std::string(kToolOpen) + buf_;  // a call left open
    out.malformed = 1;
  } else if (!(after_call_ && IsSpace(buf_))) {
    out.content = buf_;
  }
  buf_.clear();
  in_call_ = false;
  return out;
}

}  // namespace mx::server
