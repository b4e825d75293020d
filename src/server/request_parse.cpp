// Request validation: JSON -> ParsedRequest with OpenAI-style 400s naming the parameter.
#include "server/request_parse.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

const char* TypeName(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

// Typed access to the members of one JSON object. A member that is absent or null leaves the
// output untouched; a wrong type or range records the first error (later calls do nothing).
class Fields {
 public:
  Fields(const Json& obj, std::string prefix = "") : obj_(obj), prefix_(std::move(prefix)) {}

  const Json* Get(const char* name) {
    if (err_) return nullptr;
    auto it = obj_.find(name);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string Param(const char* name) const { return prefix_ + name; }

  void Fail(const char* name, std::string message) {
    if (!err_) err_ = BadRequest(Param(name), std::move(message));
  }
  void WrongType(const char* name, const char* expected, const Json& v) {
    Fail(name, fmt::format("'{}' must be {}, got {}", Param(name), expected, TypeName(v)));
  }

  bool Bool(const char* name, bool* out) {
    const Json* v = Get(name);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return WrongType(name, "a boolean", *v), false;
    *out = v->get<bool>();
    return true;
  }
  bool Int(const char* name, int64_t lo, int64_t hi, int64_t* out) {
    const Json* v = Get(name);
    if (v == nullptr) return false;
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      uint64_t u = v->get<uint64_t>();
      x = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
              ? std::numeric_limits<int64_t>::max()
              : static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
      x = v->get<int64_t>();
    } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
               std::fabs(v->get<double>()) < 9e18) {
      x = static_cast<int64_t>(v->get<double>());
    } else {
      return WrongType(name, "an integer", *v), false;
    }
    if (x < lo || x > hi) {
      Fail(name, fmt::format("'{}' must be in [{}, {}], got {}", Param(name), lo, hi, x));
      return false;
    }
    *out = x;
    return true;
  }
  template <typename T>
  bool IntAs(const char* name, int64_t lo, int64_t hi, T* out) {
    int64_t x;
    if (!Int(name, lo, hi, &x)) return false;
    *out = static_cast<T>(x);
    return true;
  }
  bool Number(const char* name, double lo, double hi, float* out, bool lo_open = false) {
    const Json* v = Get(name);
    if (v == nullptr) return false;
    if (!v->is_number()) return WrongType(name, "a number", *v), false;
    double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
      Fail(name, fmt::format("'{}' must be in {}{}, {}], got {}", Param(name), lo_open ? "(" : "[",
                             lo, hi, x));
      return false;
    }
    *out = static_cast<float>(x);
    return true;
  }
  bool String(const char* name, std::string* out) {
    const Json* v = Get(name);
    if (v == nullptr) return false;
    if (!v->is_string()) return WrongType(name, "a string", *v), false;
    *out = v->get<std::string>();
    return true;
  }

  std::optional<ApiError>& error() { return err_; }

 private:
  const Json& obj_;
  std::string prefix_;
  std::optional<ApiError> err_;
};

constexpr int64_t kMaxTokensCap = int64_t{1} << 30;

// stop: a string or an array of non-empty strings.
void ReadStop(Fields& f, const RequestLimits& limits, std::vector<std::string>* out) {
  const Json* v = f.Get("stop");
  if (v == nullptr) return;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) out->push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) return f.WrongType("stop", "a string or an array of strings", *v);
  if (static_cast<int>(v->size()) > limits.max_stop) {
    return f.Fail("stop", fmt::format("'stop' has {} entries, at most {} allowed", v->size(),
                                      limits.max_stop));
  }
  for (const Json& s : *v) {
    if (!s.is_string()) return f.WrongType("stop", "an array of strings", *v);
    if (!s.get<std::string>().empty()) out->push_back(s.get<std::string>());
  }
}

void ReadTokenIdList(Fields& f, const char* name, std::vector<int32_t>* out) {
  const Json* v = f.Get(name);
  if (v == nullptr) return;
  if (!v->is_array()) return f.WrongType(name, "an array of token ids", *v);
  for (const Json& x : *v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
      return f.Fail(name,
                    fmt::format("'{}' must hold non-negative integer token ids", f.Param(name)));
    }
    out->push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
}

// Output constraints: OpenAI response_format, sglang regex / ebnf / json_schema, vLLM
// guided_json / guided_regex / guided_choice / guided_grammar. At most one per request.
void ReadConstraint(Fields& f, ParsedRequest* r) {
  using grammar::ConstraintKind;
  auto set = [&](const char* name, grammar::ConstraintSpec spec) {
    if (r->constraint) {
      return f.Fail(name, fmt::format("'{}' and '{}' both constrain the output; give one",
                                      r->constraint_param, f.Param(name)));
    }
    r->constraint = std::move(spec);
    r->constraint_param = f.Param(name);
  };
  // A schema given as an object, or as JSON text (sglang's json_schema is a string).
  auto schema = [&](const char* name, const Json& v) {
    if (v.is_string()) return set(name, {ConstraintKind::kJsonSchema, v.get<std::string>(), {}});
    if (!v.is_object() && !v.is_boolean()) return f.WrongType(name, "an object or a string", v);
    set(name, {ConstraintKind::kJsonSchema, v.dump(), {}});
  };
  for (const char* name : {"json_schema", "guided_json"}) {
    if (const Json* v = f.Get(name)) schema(name, *v);
  }
  for (auto [name, kind] :
       {std::pair{"regex", ConstraintKind::kRegex},
        std::pair{"guided_regex", ConstraintKind::kRegex}, std::pair{"ebnf", ConstraintKind::kEbnf},
        std::pair{"guided_grammar", ConstraintKind::kEbnf}}) {
    std::string text;
    if (f.String(name, &text)) set(name, {kind, std::move(text), {}});
  }
  if (const Json* v = f.Get("guided_choice")) {
    grammar::ConstraintSpec spec{ConstraintKind::kChoice, "", {}};
    if (!v->is_array() || v->empty()) {
      return f.Fail("guided_choice", "'guided_choice' must be a non-empty array of strings");
    }
    for (const Json& c : *v) {
      if (!c.is_string()) {
        return f.Fail("guided_choice", "'guided_choice' must be a non-empty array of strings");
      }
      spec.choices.push_back(c.get<std::string>());
    }
    set("guided_choice", std::move(spec));
  }
  if (const Json* rf = f.Get("response_format")) {
    if (!rf->is_object()) return f.WrongType("response_format", "an object", *rf);
    Fields rff(*rf, "response_format.");
    std::string type = "text";
    rff.String("type", &type);
    if (rff.error()) {
      f.error() = rff.error();
    } else if (type == "json_object") {
      set("response_format", {ConstraintKind::kJsonObject, "", {}});
    } else if (type == "json_schema") {
      const Json* js = rff.Get("json_schema");
      if (js == nullptr || !js->is_object() || !js->contains("schema")) {
        return f.Fail("response_format",
                      "response_format type 'json_schema' needs 'json_schema': {\"name\": ..., "
                      "\"schema\": {...}}");
      }
      Fields jf(*js, "response_format.json_schema.");
      std::string name;
      bool strict = false;
      jf.String("name", &name);
      jf.Bool("strict", &strict);
      if (jf.error()) {
        f.error() = jf.error();
      } else {
        schema("response_format", (*js)["schema"]);
      }
    } else if (type != "text") {
      f.Fail("response_format",
             fmt::format("response_format type '{}' is not supported (text, json_object, "
                         "json_schema)",
                         type));
    }
  }
}

// Sampling fields shared by chat and completions (OpenAI names plus sglang/vLLM extensions).
void ReadSampling(Fields& f, const RequestLimits& limits, ParsedRequest* r) {
  GenerationRequest& g = r->gen;
  g.sampling.temperature = 1.0f;
  f.Number("temperature", 0.0, 100.0, &g.sampling.temperature);
  f.Number("top_p", 0.0, 1.0, &g.sampling.top_p, /*lo_open=*/true);
  int64_t top_k = 0;
  if (f.Int("top_k", -1, std::numeric_limits<int32_t>::max(), &top_k)) {
    g.sampling.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  }
  f.Number("min_p", 0.0, 1.0, &g.sampling.min_p);
  int64_t seed = 0;
  r->seed_given = f.Int("seed", std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), &seed);
  // note: without a seed the handler draws one per choice (DrawSeed), as OpenAI, vLLM and
  // sglang do; 0 here is only a placeholder.
  g.sampling.seed = r->seed_given ? static_cast<uint64_t>(seed) : 0;
  f.Number("frequency_penalty", -2.0, 2.0, &g.frequency_penalty);
  f.Number("presence_penalty", -2.0, 2.0, &g.presence_penalty);
  f.Number("repetition_penalty", 0.0, 2.0, &g.repetition_penalty, /*lo_open=*/true);
  ReadStop(f, limits, &g.stop);
  ReadTokenIdList(f, "stop_token_ids", &g.stop_token_ids);
  f.Bool("ignore_eos", &g.ignore_eos);
  f.IntAs("min_tokens", 0, kMaxTokensCap, &g.min_tokens);
  f.IntAs("n", 1, limits.max_n, &r->n);
  f.Bool("skip_special_tokens", &r->skip_special_tokens);
  bool stream = false;
  f.Bool("stream", &stream);
  r->stream = stream;
  if (const Json* so = f.Get("stream_options")) {
    if (!so->is_object()) return f.WrongType("stream_options", "an object", *so);
    Fields sf(*so, "stream_options.");
    sf.Bool("include_usage", &r->include_usage);
    if (sf.error()) f.error() = sf.error();
  }
  ReadConstraint(f, r);
}

void ReadMaxTokens(Fields& f, ParsedRequest* r, const char* primary, const char* alias) {
  if (f.IntAs(primary, 1, kMaxTokensCap, &r->gen.max_tokens)) {
    r->max_tokens_given = true;
  } else if (alias != nullptr && f.IntAs(alias, 1, kMaxTokensCap, &r->gen.max_tokens)) {
    r->max_tokens_given = true;
  }
}

// Message content: a string, null, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> NormalizeContent(Json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) return std::nullopt;
  if (!content.is_array()) {
    return BadRequest(param,
                      fmt::format("'{}' must be a string or an array of content parts", param));
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    std::string p = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) return BadRequest(p, fmt::format("'{}' must be an object", p));
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      return BadRequest(p + ".type", fmt::format("'{}.type' must be a string", p));
    }
    if (*type != "text") {
      return BadRequest(p + ".type",
                        fmt::format("content part type '{}' is not supported (text only)",
                                    type->get<std::string>()));
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      return BadRequest(p + ".text", fmt::format("'{}.text' must be a string", p));
    }
    text += t->get<std::string>();
  }
  content = text;
  return std::nullopt;
}

std::optional<ApiError> NormalizeMessages(const Json& in, Json* out) {
  if (!in.is_array()) {
    return BadRequest("messages", fmt::format("'messages' must be an array, got {}", TypeName(in)));
  }
  if (in.empty()) return BadRequest("messages", "'messages' must not be empty");
  *out = Json::array();
  for (size_t i = 0; i < in.size(); ++i) {
    std::string p = fmt::format("messages[{}]", i);
    if (!in[i].is_object()) return BadRequest(p, fmt::format("'{}' must be an object", p));
    Json m = in[i];
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return BadRequest(p + ".role", fmt::format("'{}.role' must be a string", p));
    }
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer") {
      return BadRequest(p + ".role",
                        fmt::format("'{}.role' must be system, user, assistant, tool or "
                                    "developer, got '{}'",
                                    p, r));
    }
    if (r == "developer") m["role"] = "system";
    if (!m.contains("content")) m["content"] = nullptr;
    if (auto e = NormalizeContent(m["content"], p + ".content")) return e;
    if (m["content"].is_null()) {
      if (r != "assistant") {
        return BadRequest(p + ".content", fmt::format("'{}.content' is required", p));
      }
      m["content"] = "";
    }
    // Templates iterate tool-call arguments as a mapping; OpenAI sends them as a JSON string.
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) {
        return BadRequest(p + ".tool_calls", fmt::format("'{}.tool_calls' must be an array", p));
      }
      for (size_t j = 0; j < tc->size(); ++j) {
        std::string tp = fmt::format("{}.tool_calls[{}].function", p, j);
        Json& call = (*tc)[j];
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
          return BadRequest(tp, fmt::format("'{}' must be an object", tp));
        }
        Json& fn = call["function"];
        if (!fn.contains("name") || !fn["name"].is_string()) {
          return BadRequest(tp + ".name", fmt::format("'{}.name' must be a string", tp));
        }
        if (!fn.contains("arguments") || fn["arguments"].is_null())
          fn["arguments"] = Json::object();
        if (fn["arguments"].is_string()) {
          Json args = Json::parse(fn["arguments"].get<std::string>(), nullptr, false);
          if (args.is_discarded() || !args.is_object()) {
            return BadRequest(tp + ".arguments",
                              fmt::format("'{}.arguments' must be a JSON object string", tp));
          }
          fn["arguments"] = std::move(args);
        } else if (!fn["arguments"].is_object()) {
          return BadRequest(tp + ".arguments",
                            fmt::format("'{}.arguments' must be a JSON object string", tp));
        }
      }
    }
    out->push_back(std::move(m));
  }
  return std::nullopt;
}

// tools and tool_choice. "required" and a named function become a tool-call constraint
// (grammar/tool_call_grammar.h): the output is one call (named) or one or more (required) in
// GLM's markup with arguments matching each tool's parameter schema. "none" keeps the tools
// out of the prompt and the output is never parsed into tool calls.
std::optional<ApiError> ReadTools(Fields& f, ParsedRequest* r) {
  const Json* tools = f.Get("tools");
  std::string choice = "auto";
  std::optional<std::string> forced;  // a named function
  if (const Json* tc = f.Get("tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        return BadRequest("tool_choice", "'tool_choice' must be none, auto, required or an object");
      }
    } else if (tc->is_object()) {
      auto fn = tc->find("function");
      if (tc->value("type", "") != "function" || fn == tc->end() || !fn->is_object() ||
          !fn->contains("name") || !(*fn)["name"].is_string()) {
        return BadRequest("tool_choice",
                          "'tool_choice' must be {\"type\": \"function\", "
                          "\"function\": {\"name\": ...}}");
      }
      choice = "function";
      forced = (*fn)["name"].get<std::string>();
    } else {
      return BadRequest("tool_choice", "'tool_choice' must be a string or an object");
    }
  }
  if (tools != nullptr && !tools->is_array())
    return BadRequest("tools", "'tools' must be an array");
  const bool force = choice == "required" || forced;
  if (force && (tools == nullptr || tools->empty())) {
    return BadRequest("tool_choice", fmt::format("'tool_choice' {} needs tools",
                                                 forced ? "naming a function" : "'required'"));
  }
  if (tools == nullptr) return std::nullopt;
  bool found = false;
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
      return BadRequest(p, fmt::format("'{}' must be an object with a 'function' object", p));
    }
    if (!t["function"].contains("name") || !t["function"]["name"].is_string()) {
      return BadRequest(p + ".function.name",
                        fmt::format("'{}.function.name' must be a string", p));
    }
    found = found || (forced && t["function"]["name"] == *forced);
  }
  if (forced && !found) {
    return BadRequest("tool_choice",
                      fmt::format("'tool_choice' names '{}', which is not in 'tools'", *forced));
  }
  // parallel_tool_calls: false allows a single call (forced: by the grammar; auto: the output
  // ends after the first call).
  if (const Json* p = f.Get("parallel_tool_calls"); p != nullptr) {
    if (!p->is_boolean()) {
      return BadRequest("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    }
    r->parallel_tool_calls = p->get<bool>();
  }
  if (choice == "none" || tools->empty()) return std::nullopt;
  r->tools = *tools;
  r->parse_tool_calls = true;
  if (force) {
    if (r->constraint) {
      return BadRequest("tool_choice",
                        fmt::format("'tool_choice' {} and '{}' both constrain the output; give one",
                                    choice, r->constraint_param));
    }
    Json spec = {{"tools", *tools},
                 {"name", forced ? Json(*forced) : Json(nullptr)},
                 {"parallel", r->parallel_tool_calls}};
    r->constraint = grammar::ConstraintSpec{grammar::ConstraintKind::kToolCall, Dump(spec), {}};
    r->constraint_param = "tool_choice";
  }
  return std::nullopt;
}

// Thinking budgets under their several names (the first given wins): thinking_budget,
// vLLM's thinking_token_budget, sglang's custom_params.thinking_budget; and OpenAI's
// reasoning_effort, whose none / minimal turn thinking off (unless chat_template_kwargs say).
std::optional<ApiError> ReadThinking(Fields& f, ParsedRequest* r) {
  for (const char* name : {"thinking_budget", "thinking_token_budget"}) {
    if (r->thinking_budget < 0) f.IntAs(name, 0, kMaxTokensCap, &r->thinking_budget);
  }
  if (const Json* cp = f.Get("custom_params"); cp != nullptr && r->thinking_budget < 0) {
    if (!cp->is_object()) return BadRequest("custom_params", "'custom_params' must be an object");
    Fields cf(*cp, "custom_params.");
    cf.IntAs("thinking_budget", 0, kMaxTokensCap, &r->thinking_budget);
    if (cf.error()) return cf.error();
  }
  std::string effort;
  if (f.String("reasoning_effort", &effort)) {
    constexpr const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), effort) == std::end(kEfforts)) {
      return BadRequest("reasoning_effort",
                        "'reasoning_effort' must be none, minimal, low, medium, high or xhigh");
    }
    const bool off = effort == "none" || effort == "minimal";
    if (!r->chat_template_kwargs.contains("enable_thinking")) {
      r->chat_template_kwargs["enable_thinking"] = !off;
    }
    if (!off) r->reasoning_effort = effort;
  }
  return f.error();
}

std::optional<ApiError> ReadLogprobsCompletion(Fields& f, const RequestLimits& limits,
                                               ParsedRequest* r) {
  int64_t lp = -1;
  if (const Json* v = f.Get("logprobs"); v != nullptr && v->is_boolean()) {
    lp = v->get<bool>() ? 0 : -1;
  } else if (!f.Int("logprobs", 0, limits.max_top_logprobs, &lp)) {
    lp = -1;
  }
  if (lp >= 0) {
    r->logprobs = true;
    r->top_logprobs = static_cast<int>(lp);
    r->gen.top_logprobs = static_cast<int32_t>(lp);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseBody(const std::string& text, nlohmann::ordered_json* out,
                                  int max_depth) {
  // note: the scan comes first so that no nested value is ever built: copying or destroying
  // a json value recurses once per level, and 200,000 levels overflow the stack.
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    ApiError e = BadRequest("", fmt::format("the request body nests JSON deeper than {} levels "
                                            "(--max-json-depth)",
                                            max_depth));
    e.code = "json_too_deep";
    return e;
  }
  *out = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return BadRequest("", "the request body is not valid JSON");
  if (!out->is_object()) return BadRequest("", "the request body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> ParseChatRequest(const nlohmann::ordered_json& body,
                                         const RequestLimits& limits, ParsedRequest* out) {
  ParsedRequest r;
  r.kind = ApiKind::kChat;
  Fields f(body);
  f.String("model", &r.model);
  ReadMaxTokens(f, &r, "max_completion_tokens", "max_tokens");
  ReadSampling(f, limits, &r);
  f.Bool("logprobs", &r.logprobs);
  if (f.IntAs("top_logprobs", 0, limits.max_top_logprobs, &r.top_logprobs) && !r.logprobs &&
      r.top_logprobs > 0) {
    f.Fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
  if (r.logprobs) r.gen.top_logprobs = r.top_logprobs;
  f.Bool("separate_reasoning", &r.separate_reasoning);
  if (const Json* k = f.Get("chat_template_kwargs")) {
    if (!k->is_object()) {
      f.WrongType("chat_template_kwargs", "an object", *k);
    } else {
      r.chat_template_kwargs = *k;
    }
  }
  if (f.error()) return f.error();
  if (auto e = ReadThinking(f, &r)) return e;
  if (auto e = ReadTools(f, &r)) return e;
  auto m = body.find("messages");
  if (m == body.end()) return BadRequest("messages", "'messages' is required");
  if (auto e = NormalizeMessages(*m, &r.messages)) return e;
  if (r.gen.min_tokens > r.gen.max_tokens && r.max_tokens_given) {
    return BadRequest("min_tokens", "'min_tokens' must not exceed 'max_tokens'");
  }
  *out = std::move(r);
  return std::nullopt;
}

namespace {

// prompt: string | [string] | [int] | [[int]].
std::optional<ApiError> ReadPrompt(const Json* v, const char* param,
                                   std::vector<PromptInput>* out) {
  if (v == nullptr) return BadRequest(param, fmt::format("'{}' is required", param));
  auto ids_of = [&](const Json& arr, std::vector<int32_t>* ids) -> bool {
    for (const Json& x : arr) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
        return false;
      }
      ids->push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    return true;
  };
  const std::string bad = fmt::format(
      "'{}' must be a string, an array of strings, an array of token ids or an array of "
      "token-id arrays",
      param);
  if (v->is_string()) {
    out->push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->empty()) return BadRequest(param, fmt::format("'{}' must not be empty", param));
    if ((*v)[0].is_number()) {
      std::vector<int32_t> ids;
      if (!ids_of(*v, &ids)) return BadRequest(param, bad);
      out->push_back(std::move(ids));
    } else {
      for (const Json& p : *v) {
        if (p.is_string()) {
          out->push_back(p.get<std::string>());
        } else if (p.is_array()) {
          std::vector<int32_t> ids;
          if (!ids_of(p, &ids)) return BadRequest(param, bad);
          out->push_back(std::move(ids));
        } else {
          return BadRequest(param, bad);
        }
      }
    }
  } else {
    return BadRequest(param, bad);
  }
  for (const PromptInput& p : *out) {
    bool empty = std::holds_alternative<std::string>(p) ? std::get<std::string>(p).empty()
                                                        : std::get<1>(p).empty();
    if (empty) return BadRequest(param, fmt::format("'{}' must not be empty", param));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                               const RequestLimits& limits, ParsedRequest* out) {
  ParsedRequest r;
  r.kind = ApiKind::kCompletion;
  Fields f(body);
  f.String("model", &r.model);
  ReadMaxTokens(f, &r, "max_tokens", "max_completion_tokens");
  ReadSampling(f, limits, &r);
  ReadLogprobsCompletion(f, limits, &r);
  f.Bool("echo", &r.echo);
  if (f.error()) return f.error();
  if (auto e = ReadPrompt(f.Get("prompt"), "prompt", &r.prompts)) return e;
  if (static_cast<int64_t>(r.prompts.size()) * r.n > 256) {
    return BadRequest("prompt", "a batch may hold at most 256 prompts x n");
  }
  if (!r.max_tokens_given) r.gen.max_tokens = 16;
  if (r.gen.min_tokens > r.gen.max_tokens) {
    return BadRequest("min_tokens", "'min_tokens' must not exceed 'max_tokens'");
  }
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> ParseGenerateRequest(const nlohmann::ordered_json& body,
                                             const RequestLimits& limits, ParsedRequest* out) {
  ParsedRequest r;
  r.kind = ApiKind::kGenerate;
  Fields f(body);
  f.String("model", &r.model);
  f.Bool("stream", &r.stream);
  f.String("rid", &r.request_id);
  bool return_logprob = false;
  f.Bool("return_logprob", &return_logprob);
  int64_t top = 0;
  f.Int("top_logprobs_num", 0, limits.max_top_logprobs, &top);
  if (return_logprob) {
    r.logprobs = true;
    r.top_logprobs = static_cast<int>(top);
    r.gen.top_logprobs = static_cast<int32_t>(top);
  }
  if (f.error()) return f.error();
  const Json* text = f.Get("text");
  const Json* ids = f.Get("input_ids");
  if ((text == nullptr) == (ids == nullptr)) {
    return BadRequest("text", "give exactly one of 'text' or 'input_ids'");
  }
  if (auto e = ReadPrompt(text != nullptr ? text : ids, text != nullptr ? "text" : "input_ids",
                          &r.prompts)) {
    return e;
  }
  if (r.prompts.size() != 1) {
    return BadRequest(text != nullptr ? "text" : "input_ids",
                      "batches are not supported on /generate; send one prompt per request");
  }
  r.gen.sampling.temperature = 1.0f;
  if (const Json* sp = f.Get("sampling_params")) {
    if (!sp->is_object())
      return BadRequest("sampling_params", "'sampling_params' must be an object");
    Fields s(*sp, "sampling_params.");
    ReadMaxTokens(s, &r, "max_new_tokens", nullptr);
    s.IntAs("min_new_tokens", 0, kMaxTokensCap, &r.gen.min_tokens);
    ReadSampling(s, limits, &r);
    r.stream = r.stream;  // `stream` is top level on /generate
    if (s.error()) return s.error();
  }
  f.Bool("stream", &r.stream);
  if (!r.constraint) ReadConstraint(f, &r);  // sglang also takes them as top-level fields
  if (f.error()) return f.error();
  if (!r.max_tokens_given) r.gen.max_tokens = 128;
  r.n = 1;
  *out = std::move(r);
  return std::nullopt;
}

}  // namespace mx::server
