// Incremental GLM tool-call parser.
#include "server/tool_call_parser.h"

#include "base/strings.h"
#include "server/api_error.h"
#include "server/reasoning_parser.h"

namespace mx::server {
namespace {

constexpr std::string_view kToolOpen = "<tool_call>";
constexpr std::string_view kToolClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValOpen = "<arg_value>";
constexpr std::string_view kValClose = "</arg_value>";

constexpr std::string_view kSpace = " \t\r\n";

bool IsSpace(std::string_view s) { return Trim(s, kSpace).empty(); }

}  // namespace

ToolCallParser::ToolCallParser(const nlohmann::ordered_json& tools) : tools_(tools) {}

ParsedToolCall ToolCallParser::ParseBody(std::string_view body) const {
  ParsedToolCall call;
  size_t k = body.find(kKeyOpen);
  call.name = std::string(Trim(body.substr(0, k), kSpace));
  // The schema of this tool's parameters, for argument types.
  const nlohmann::ordered_json* props = nullptr;
  if (tools_.is_array()) {
    for (const auto& t : tools_) {
      if (t.contains("function") && t["function"].value("name", "") == call.name) {
        const auto& fn = t["function"];
        if (fn.contains("parameters") && fn["parameters"].is_object() &&
            fn["parameters"].contains("properties") && fn["parameters"]["properties"].is_object()) {
          props = &fn["parameters"]["properties"];
        }
        break;
      }
    }
  }
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  while (k != std::string_view::npos) {
    size_t kend = body.find(kKeyClose, k);
    if (kend == std::string_view::npos) break;
    std::string key(Trim(body.substr(k + kKeyOpen.size(), kend - k - kKeyOpen.size()), kSpace));
    size_t v = body.find(kValOpen, kend);
    if (v == std::string_view::npos) break;
    size_t vend = body.find(kValClose, v);
    if (vend == std::string_view::npos) break;
    std::string value(body.substr(v + kValOpen.size(), vend - v - kValOpen.size()));
    bool as_string = false;
    if (props != nullptr && props->contains(key) && (*props)[key].is_object()) {
      const auto& type = (*props)[key].value("type", nlohmann::ordered_json());
      as_string = type.is_string() && type.get<std::string>() == "string";
    }
    nlohmann::ordered_json parsed;
    if (!as_string) parsed = nlohmann::ordered_json::parse(value, nullptr, false);
    if (as_string || parsed.is_discarded()) {
      args[key] = value;
    } else {
      args[key] = std::move(parsed);
    }
    k = body.find(kKeyOpen, vend);
  }
  call.arguments = Dump(args);
  return call;
}

ToolCallParser::Out ToolCallParser::Push(std::string_view text) {
  Out out;
  buf_.append(text);
  while (!buf_.empty()) {
    if (in_call_) {
      size_t close = buf_.find(kToolClose);
      if (close == std::string::npos) return out;
      out.calls.push_back(ParseBody(std::string_view(buf_).substr(0, close)));
      buf_.erase(0, close + kToolClose.size());
      in_call_ = false;
      after_call_ = true;
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
    out.content = std::string(kToolOpen) + buf_;
  } else if (!(after_call_ && IsSpace(buf_))) {
    out.content = buf_;
  }
  buf_.clear();
  in_call_ = false;
  return out;
}

}  // namespace mx::server
