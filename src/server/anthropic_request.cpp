// Anthropic Messages body -> OpenAI chat body -> ParsedRequest.
#include "server/anthropic_request.h"

#include <fmt/format.h>

#include "server/chat_body.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

const char* TypeOf(const Json& v) { return v.type_name(); }

// A block's "type" string, or an error naming `p`.
std::optional<ApiError> BlockType(const Json& block, const std::string& p, std::string* type) {
  if (!block.is_object()) return BadRequest(p, fmt::format("'{}' must be an object", p));
  auto t = block.find("type");
  if (t == block.end() || !t->is_string()) {
    return BadRequest(p + ".type", fmt::format("'{}.type' must be a string", p));
  }
  *type = t->get<std::string>();
  return std::nullopt;
}

ApiError Unsupported(const std::string& p, const std::string& type, const char* allowed) {
  return BadRequest(p + ".type", fmt::format("'{}' is a '{}' block, which this server does not "
                                             "support ({})",
                                             p, type, allowed));
}

// Text of a string or of an array of text blocks (system, tool_result content).
std::optional<ApiError> TextOf(const Json& v, const std::string& p, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) {
    return BadRequest(
        p, fmt::format("'{}' must be a string or an array of text blocks, got {}", p, TypeOf(v)));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string bp = fmt::format("{}[{}]", p, i);
    std::string type;
    if (auto e = BlockType(v[i], bp, &type)) return e;
    if (type != "text") return Unsupported(bp, type, "text blocks only");
    std::string text;
    if (auto e = RequireString(v[i], "text", bp, &text)) return e;
    *out += text;
  }
  return std::nullopt;
}

// One Anthropic message -> one or more chat messages appended to `out`.
std::optional<ApiError> TranslateMessage(const Json& m, const std::string& p, Json* out) {
  if (!m.is_object()) return BadRequest(p, fmt::format("'{}' must be an object", p));
  std::string role;
  if (auto e = RequireString(m, "role", p, &role)) return e;
  if (role != "user" && role != "assistant") {
    return BadRequest(p + ".role",
                      fmt::format("'{}.role' must be user or assistant, got '{}'", p, role));
  }
  auto c = m.find("content");
  if (c == m.end()) return BadRequest(p + ".content", fmt::format("'{}.content' is required", p));
  if (c->is_string()) {
    out->push_back(Json{{"role", role}, {"content", *c}});
    return std::nullopt;
  }
  if (!c->is_array()) {
    return BadRequest(p + ".content",
                      fmt::format("'{}.content' must be a string or an array of blocks", p));
  }
  std::string text, thinking;
  Json tool_calls = Json::array();
  Json tool_results = Json::array();
  for (size_t i = 0; i < c->size(); ++i) {
    const Json& b = (*c)[i];
    const std::string bp = fmt::format("{}.content[{}]", p, i);
    std::string type;
    if (auto e = BlockType(b, bp, &type)) return e;
    if (type == "text") {
      std::string t;
      if (auto e = RequireString(b, "text", bp, &t)) return e;
      text += t;
    } else if (type == "thinking" && role == "assistant") {
      std::string t;
      if (auto e = RequireString(b, "thinking", bp, &t)) return e;
      thinking += t;
    } else if (type == "redacted_thinking" && role == "assistant") {
      // note: opaque data another server encrypted; nothing of it can be rendered.
    } else if (type == "tool_use" && role == "assistant") {
      std::string id, name;
      if (auto e = RequireString(b, "id", bp, &id)) return e;
      if (auto e = RequireString(b, "name", bp, &name)) return e;
      auto input = b.find("input");
      if (input == b.end() || !input->is_object()) {
        return BadRequest(bp + ".input", fmt::format("'{}.input' must be an object", bp));
      }
      tool_calls.push_back(Json{{"id", id},
                                {"type", "function"},
                                {"function", Json{{"name", name}, {"arguments", *input}}}});
    } else if (type == "tool_result" && role == "user") {
      std::string id, result;
      if (auto e = RequireString(b, "tool_use_id", bp, &id)) return e;
      if (auto rc = b.find("content"); rc != b.end() && !rc->is_null()) {
        if (auto e = TextOf(*rc, bp + ".content", &result)) return e;
      }
      auto err = b.find("is_error");
      if (err != b.end() && !err->is_null() && !err->is_boolean()) {
        return BadRequest(bp + ".is_error", fmt::format("'{}.is_error' must be a boolean", bp));
      }
      // note: GLM's templates have no error flag on a tool response; the text says it.
      if (err != b.end() && err->is_boolean() && err->get<bool>()) result = "Error: " + result;
      tool_results.push_back(Json{{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else {
      return Unsupported(bp, type,
                         role == "user" ? "a user message holds text and tool_result blocks"
                                        : "an assistant message holds text, thinking and "
                                          "tool_use blocks");
    }
  }
  if (role == "user") {
    for (Json& r : tool_results) out->push_back(std::move(r));
    if (!text.empty() || tool_results.empty()) {
      out->push_back(Json{{"role", "user"}, {"content", text}});
    }
    return std::nullopt;
  }
  Json a{{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) a["reasoning_content"] = thinking;
  if (!tool_calls.empty()) a["tool_calls"] = std::move(tool_calls);
  out->push_back(std::move(a));
  return std::nullopt;
}

// Client tools only: a server tool (web search, bash, ...) has a type other than "custom".
std::optional<ApiError> CheckToolType(const Json& t, const std::string& p) {
  auto type = t.find("type");
  if (type == t.end() || type->is_null() || *type == "custom") return std::nullopt;
  return BadRequest(p + ".type",
                    fmt::format("'{}' is a '{}' tool, which this server does not run (client "
                                "tools with an input_schema only)",
                                p, type->is_string() ? type->get<std::string>() : "?"));
}

// tool_choice -> chat's tool_choice and parallel_tool_calls.
std::optional<ApiError> TranslateToolChoice(const Json& tc, Json* chat) {
  if (!tc.is_object()) return BadRequest("tool_choice", "'tool_choice' must be an object");
  std::string type;
  if (auto e = BlockType(tc, "tool_choice", &type)) return e;
  if (auto d = tc.find("disable_parallel_tool_use"); d != tc.end() && !d->is_null()) {
    if (!d->is_boolean()) {
      return BadRequest("tool_choice.disable_parallel_tool_use",
                        "'tool_choice.disable_parallel_tool_use' must be a boolean");
    }
    (*chat)["parallel_tool_calls"] = !d->get<bool>();
  }
  if (type == "auto") {
    (*chat)["tool_choice"] = "auto";
  } else if (type == "any") {
    (*chat)["tool_choice"] = "required";
  } else if (type == "none") {
    (*chat)["tool_choice"] = "none";
  } else if (type == "tool") {
    std::string name;
    if (auto e = RequireString(tc, "name", "tool_choice", &name)) return e;
    (*chat)["tool_choice"] = Json{{"type", "function"}, {"function", Json{{"name", name}}}};
  } else {
    return BadRequest(
        "tool_choice.type",
        fmt::format("'tool_choice.type' must be auto, any, tool or none, got '{}'", type));
  }
  return std::nullopt;
}

std::optional<ApiError> TranslateThinking(const Json& th, Json* kwargs) {
  std::string type;
  if (auto e = BlockType(th, "thinking", &type)) return e;
  if (type == "disabled") {
    (*kwargs)["enable_thinking"] = false;
    return std::nullopt;
  }
  if (type == "adaptive") {  // the model decides how much: GLM's thinking, unbounded
    (*kwargs)["enable_thinking"] = true;
    return std::nullopt;
  }
  if (type != "enabled") {
    return BadRequest("thinking.type", fmt::format("'thinking.type' must be enabled, adaptive or "
                                                   "disabled, got '{}'",
                                                   type));
  }
  auto b = th.find("budget_tokens");
  if (b == th.end() || !b->is_number_integer() || b->get<int64_t>() < 1) {
    return BadRequest("thinking.budget_tokens",
                      "'thinking.budget_tokens' must be a positive integer");
  }
  (*kwargs)["enable_thinking"] = true;
  return std::nullopt;
}

// Fields copied as they are: the chat parser checks their types and ranges.
constexpr const char* kPassThrough[] = {"model", "temperature", "top_p", "top_k", "stream"};

}  // namespace

std::optional<ApiError> AnthropicToChatBody(const Json& body, const RequestLimits& limits,
                                            bool count_tokens, Json* chat) {
  *chat = Json::object();
  for (const char* f : kPassThrough) {
    if (auto it = body.find(f); it != body.end()) (*chat)[f] = *it;
  }
  if (!count_tokens) {
    auto mt = body.find("max_tokens");
    if (mt == body.end() || mt->is_null())
      return BadRequest("max_tokens", "'max_tokens' is required");
    (*chat)["max_tokens"] = *mt;
  }
  if (auto md = body.find("metadata"); md != body.end() && !md->is_null() && !md->is_object()) {
    return BadRequest("metadata", "'metadata' must be an object");
  }
  if (auto ss = body.find("stop_sequences"); ss != body.end() && !ss->is_null()) {
    if (!ss->is_array()) return BadRequest("stop_sequences", "'stop_sequences' must be an array");
    if (static_cast<int>(ss->size()) > limits.max_stop) {
      return BadRequest("stop_sequences",
                        fmt::format("'stop_sequences' has {} entries, at most {} allowed",
                                    ss->size(), limits.max_stop));
    }
    for (const Json& s : *ss) {
      if (!s.is_string()) {
        return BadRequest("stop_sequences", "'stop_sequences' must be an array of strings");
      }
    }
    (*chat)["stop"] = *ss;
  }
  Json messages = Json::array();
  if (auto sys = body.find("system"); sys != body.end() && !sys->is_null()) {
    std::string text;
    if (auto e = TextOf(*sys, "system", &text)) return e;
    messages.push_back(Json{{"role", "system"}, {"content", text}});
  }
  auto ms = body.find("messages");
  if (ms == body.end()) return BadRequest("messages", "'messages' is required");
  if (!ms->is_array() || ms->empty()) {
    return BadRequest("messages", "'messages' must be a non-empty array");
  }
  for (size_t i = 0; i < ms->size(); ++i) {
    if (auto e = TranslateMessage((*ms)[i], fmt::format("messages[{}]", i), &messages)) return e;
  }
  (*chat)["messages"] = std::move(messages);
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    Json tools;
    if (auto e = ChatTools(*t, CheckToolType, "input_schema", /*schema_required=*/true, &tools)) {
      return e;
    }
    (*chat)["tools"] = std::move(tools);
  }
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (auto e = TranslateToolChoice(*tc, chat)) return e;
  }
  Json kwargs = Json::object();
  if (auto th = body.find("thinking"); th != body.end() && !th->is_null()) {
    if (auto e = TranslateThinking(*th, &kwargs)) return e;
  }
  if (!kwargs.empty()) (*chat)["chat_template_kwargs"] = std::move(kwargs);
  if (auto of = body.find("output_format"); of != body.end() && !of->is_null()) {
    if (!of->is_object() || of->value("type", "") != "json_schema" || !of->contains("schema")) {
      return BadRequest("output_format",
                        "'output_format' must be {\"type\": \"json_schema\", \"schema\": {...}}");
    }
    (*chat)["response_format"] =
        Json{{"type", "json_schema"},
             {"json_schema", Json{{"name", "output"}, {"schema", (*of)["schema"]}}}};
  }
  return std::nullopt;
}

std::optional<ApiError> ParseMessagesRequest(const Json& body, const RequestLimits& limits,
                                             bool count_tokens, ParsedRequest* out) {
  Json chat;
  if (auto e = AnthropicToChatBody(body, limits, count_tokens, &chat)) return e;
  if (auto e = ParseChatRequest(chat, limits, out)) return e;
  out->kind = ApiKind::kMessages;
  if (auto th = body.find("thinking");
      th != body.end() && th->is_object() && th->value("type", "") == "enabled") {
    const int64_t budget = (*th)["budget_tokens"].get<int64_t>();  // checked above
    out->thinking_budget = static_cast<int32_t>(std::min<int64_t>(budget, INT32_MAX));
  }
  return std::nullopt;
}

}  // namespace mx::server
