// Responses body -> chat body -> ParsedRequest.
#include "server/responses_request.h"

#include <fmt/format.h>

#include "server/chat_body.h"
#include "server/server_impl.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

// Text of a content: a string or parts of the given text types.
std::optional<ApiError> PartsText(const Json& content, const std::string& p, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return BadRequest(p, fmt::format("'{}' must be a string or an array of content parts", p));
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pp = fmt::format("{}[{}]", p, i);
    std::string type;
    if (!part.is_object()) return BadRequest(pp, fmt::format("'{}' must be an object", pp));
    if (auto e = RequireString(part, "type", pp, &type)) return e;
    if (type != "input_text" && type != "output_text" && type != "text" &&
        type != "reasoning_text" && type != "summary_text") {
      return BadRequest(pp + ".type", fmt::format("'{}' is an '{}' part, which this server does "
                                                  "not support (text parts only)",
                                                  pp, type));
    }
    std::string text;
    if (auto e = RequireString(part, "text", pp, &text)) return e;
    *out += text;
  }
  return std::nullopt;
}

// The assistant message the next assistant-side item joins (the last message when it is one).
Json& AssistantTail(Json& messages) {
  if (messages.empty() || messages.back()["role"] != "assistant") {
    messages.push_back(Json{{"role", "assistant"}, {"content", ""}});
  }
  return messages.back();
}

// One input item into chat messages; the item, with an id, into `items`.
std::optional<ApiError> TranslateItem(const Json& item, const std::string& p, Json* messages,
                                      Json* items) {
  if (!item.is_object()) return BadRequest(p, fmt::format("'{}' must be an object", p));
  Json it = item;
  const std::string type = item.value("type", item.contains("role") ? "message" : "");
  if (type == "message") {
    std::string role, text;
    if (auto e = RequireString(item, "role", p, &role)) return e;
    if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
      return BadRequest(p + ".role", fmt::format("'{}.role' must be user, assistant, system or "
                                                 "developer, got '{}'",
                                                 p, role));
    }
    auto c = item.find("content");
    if (c == item.end())
      return BadRequest(p + ".content", fmt::format("'{}.content' is required", p));
    if (auto e = PartsText(*c, p + ".content", &text)) return e;
    if (role == "assistant") {
      Json& a = AssistantTail(*messages);
      a["content"] = a["content"].get<std::string>() + text;
    } else {
      messages->push_back(Json{{"role", role == "developer" ? "system" : role}, {"content", text}});
    }
    it["type"] = "message";
    if (!it.contains("id")) it["id"] = NewResponseId("msg_");
  } else if (type == "function_call") {
    std::string call_id, name, args;
    if (auto e = RequireString(item, "call_id", p, &call_id)) return e;
    if (auto e = RequireString(item, "name", p, &name)) return e;
    if (auto e = RequireString(item, "arguments", p, &args)) return e;
    Json parsed = Json::parse(args, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      return BadRequest(p + ".arguments",
                        fmt::format("'{}.arguments' must be a JSON object text", p));
    }
    Json& a = AssistantTail(*messages);
    if (!a.contains("tool_calls")) a["tool_calls"] = Json::array();
    a["tool_calls"].push_back(Json{{"id", call_id},
                                   {"type", "function"},
                                   {"function", Json{{"name", name}, {"arguments", parsed}}}});
    if (!it.contains("id")) it["id"] = NewResponseId("fc_");
  } else if (type == "function_call_output") {
    std::string call_id, output;
    if (auto e = RequireString(item, "call_id", p, &call_id)) return e;
    auto o = item.find("output");
    if (o == item.end())
      return BadRequest(p + ".output", fmt::format("'{}.output' is required", p));
    if (auto e = PartsText(*o, p + ".output", &output)) return e;
    messages->push_back(Json{{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
    if (!it.contains("id")) it["id"] = NewResponseId("fco_");
  } else if (type == "reasoning") {
    std::string text;
    if (auto c = item.find("content"); c != item.end() && !c->is_null()) {
      if (auto e = PartsText(*c, p + ".content", &text)) return e;
    } else if (auto s = item.find("summary"); s != item.end() && !s->is_null()) {
      if (auto e = PartsText(*s, p + ".summary", &text)) return e;
    }
    Json& a = AssistantTail(*messages);
    a["reasoning_content"] = a.value("reasoning_content", "") + text;
    if (!it.contains("id")) it["id"] = NewResponseId("rs_");
  } else {
    return BadRequest(p + ".type",
                      fmt::format("'{}' is an item of type '{}', which this server does not "
                                  "support (message, function_call, function_call_output, "
                                  "reasoning)",
                                  p, type));
  }
  items->push_back(std::move(it));
  return std::nullopt;
}

// Function tools only: hosted tools (web_search, file_search, ...) are not run here.
std::optional<ApiError> CheckToolType(const Json& t, const std::string& p) {
  std::string type;
  if (auto e = RequireString(t, "type", p, &type)) return e;
  if (type == "function") return std::nullopt;
  return BadRequest(p + ".type", fmt::format("'{}' is a '{}' tool, which this server does not "
                                             "run (function tools only)",
                                             p, type));
}

std::optional<ApiError> TranslateToolChoice(const Json& tc, Json* chat) {
  if (tc.is_string()) {
    (*chat)["tool_choice"] = tc;  // none / auto / required: the chat parser checks
    return std::nullopt;
  }
  if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("name") &&
      tc["name"].is_string()) {
    (*chat)["tool_choice"] = Json{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    return std::nullopt;
  }
  return BadRequest("tool_choice",
                    "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                    "\"name\": ...}");
}

// text.format -> response_format.
std::optional<ApiError> TranslateTextFormat(const Json& text, Json* chat) {
  if (!text.is_object()) return BadRequest("text", "'text' must be an object");
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return std::nullopt;
  if (!f->is_object()) return BadRequest("text.format", "'text.format' must be an object");
  const std::string type = f->value("type", "");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    (*chat)["response_format"] = Json{{"type", "json_object"}};
    return std::nullopt;
  }
  if (type == "json_schema") {
    if (!f->contains("schema")) {
      return BadRequest("text.format.schema", "'text.format' json_schema needs 'schema'");
    }
    (*chat)["response_format"] = Json{
        {"type", "json_schema"},
        {"json_schema", Json{{"name", f->value("name", "output")}, {"schema", (*f)["schema"]}}}};
    return std::nullopt;
  }
  return BadRequest("text.format.type",
                    "'text.format.type' must be text, json_object or json_schema");
}

// reasoning.effort -> chat's reasoning_effort. note: GLM thinks or does not: none and minimal
// turn thinking off; the others bound it by the server's budgets (--reasoning-budget-*).
std::optional<ApiError> TranslateReasoning(const Json& r, Json* chat) {
  if (!r.is_object()) return BadRequest("reasoning", "'reasoning' must be an object");
  auto e = r.find("effort");
  if (e == r.end() || e->is_null()) return std::nullopt;
  for (const char* name : {"none", "minimal", "low", "medium", "high", "xhigh"}) {
    if (*e == name) {
      (*chat)["reasoning_effort"] = *e;
      return std::nullopt;
    }
  }
  return BadRequest("reasoning.effort",
                    "'reasoning.effort' must be none, minimal, low, medium, high or xhigh");
}

constexpr const char* kPassThrough[] = {"model", "temperature", "top_p", "stream",
                                        "parallel_tool_calls"};
constexpr const char* kEchoed[] = {"instructions",
                                   "max_output_tokens",
                                   "parallel_tool_calls",
                                   "previous_response_id",
                                   "reasoning",
                                   "temperature",
                                   "text",
                                   "tool_choice",
                                   "tools",
                                   "top_p",
                                   "metadata"};

}  // namespace

ApiError ResponseNotFound(const std::string& id, std::string param) {
  return NotFoundError(std::move(param), fmt::format("Response with id '{}' not found.", id), "");
}

std::optional<ApiError> ParseResponsesRequest(const Json& body, const RequestLimits& limits,
                                              ResponseStore& store, ParsedRequest* out,
                                              ResponsesContext* ctx) {
  Json chat = Json::object();
  for (const char* f : kPassThrough) {
    if (auto it = body.find(f); it != body.end()) chat[f] = *it;
  }
  for (const char* f : kEchoed) {
    auto it = body.find(f);
    ctx->echo[f] = it != body.end() ? *it : Json();
  }
  if (auto mt = body.find("max_output_tokens"); mt != body.end()) chat["max_tokens"] = *mt;
  if (auto st = body.find("store"); st != body.end() && !st->is_null()) {
    if (!st->is_boolean()) return BadRequest("store", "'store' must be a boolean");
    ctx->store = st->get<bool>();
  }
  if (auto md = body.find("metadata"); md != body.end() && !md->is_null() && !md->is_object()) {
    return BadRequest("metadata", "'metadata' must be an object");
  }
  if (auto bg = body.find("background"); bg != body.end() && *bg == true) {
    return BadRequest("background", "'background': true is not supported");
  }
  Json messages = Json::array();
  if (auto prev = body.find("previous_response_id"); prev != body.end() && !prev->is_null()) {
    if (!prev->is_string()) {
      return BadRequest("previous_response_id", "'previous_response_id' must be a string");
    }
    auto stored = store.Get(prev->get<std::string>());
    if (stored == nullptr)
      return ResponseNotFound(prev->get<std::string>(), "previous_response_id");
    messages = stored->conversation;
  }
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) return BadRequest("input", "'input' is required");
  if (in->is_string()) {
    messages.push_back(Json{{"role", "user"}, {"content", *in}});
    ctx->input_items.push_back(
        Json{{"id", NewResponseId("msg_")},
             {"type", "message"},
             {"role", "user"},
             {"content", Json::array({Json{{"type", "input_text"}, {"text", *in}}})}});
  } else if (in->is_array() && !in->empty()) {
    for (size_t i = 0; i < in->size(); ++i) {
      if (auto e =
              TranslateItem((*in)[i], fmt::format("input[{}]", i), &messages, &ctx->input_items)) {
        return e;
      }
    }
  } else {
    return BadRequest("input", "'input' must be a string or a non-empty array of items");
  }
  ctx->conversation = messages;
  if (auto ins = body.find("instructions"); ins != body.end() && !ins->is_null()) {
    if (!ins->is_string()) return BadRequest("instructions", "'instructions' must be a string");
    messages.insert(messages.begin(), Json{{"role", "system"}, {"content", *ins}});
  }
  chat["messages"] = std::move(messages);
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    Json tools;
    if (auto e = ChatTools(*t, CheckToolType, "parameters", /*schema_required=*/false, &tools)) {
      return e;
    }
    chat["tools"] = std::move(tools);
  }
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (auto e = TranslateToolChoice(*tc, &chat)) return e;
  }
  if (auto t = body.find("text"); t != body.end() && !t->is_null()) {
    if (auto e = TranslateTextFormat(*t, &chat)) return e;
  }
  if (auto r = body.find("reasoning"); r != body.end() && !r->is_null()) {
    if (auto e = TranslateReasoning(*r, &chat)) return e;
  }
  if (auto e = ParseChatRequest(chat, limits, out)) {
    if (e->param == "max_tokens") {
      e->param = "max_output_tokens";
      if (size_t at = e->message.find("'max_tokens'"); at != std::string::npos) {
        e->message.replace(at, 12, "'max_output_tokens'");
      }
    }
    return e;
  }
  out->kind = ApiKind::kResponses;
  return std::nullopt;
}

}  // namespace mx::server
