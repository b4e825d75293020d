// The GLM tool-call grammar (see the header).
#include "grammar/tool_call_grammar.h"

#include <set>

#include "grammar/regex_compiler.h"
#include "grammar/utf8_ranges.h"

namespace mx::grammar {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kRawStringKeywords = {
    "type",  "description", "title",  "default",   "examples", "enum",
    "const", "pattern",     "format", "minLength", "maxLength"};
const std::set<std::string, std::less<>> kParameterKeywords = {
    "type",        "properties", "required", "additionalProperties",
    "description", "title",      "$defs",    "definitions",
    "$schema",     "$id"};

bool IsRawString(const Json& s) {
  return s.is_object() && s.contains("type") && s["type"].is_string() &&
         s["type"].get<std::string>() == "string";
}

// A string-typed value as the parser reads it: raw text, no `<`.
Status RawString(GrammarBuilder& b, const Json& s, const std::string& path, Elem* out) {
  for (const auto& [k, v] : s.items()) {
    if (!kRawStringKeywords.contains(k)) {
      return Unimplemented("tool parameter '{}': keyword '{}' is not supported for a string", path,
                           k);
    }
  }
  auto literal_list = [&](const Json& vals) -> Status {
    std::vector<Seq> alts;
    for (const Json& v : vals) {
      if (!v.is_string()) continue;  // a non-string can never be a string's value
      const std::string t = v.get<std::string>();
      if (t.find('<') != std::string::npos) {
        return Unimplemented("tool parameter '{}': a string value with '<' ({})", path, t);
      }
      alts.push_back(b.Literal(t));
    }
    if (alts.empty()) return InvalidArgument("tool parameter '{}': no string value allowed", path);
    *out = b.Alt(std::move(alts), "raw_enum");
    return Status::Ok();
  };
  if (s.contains("const")) return literal_list(Json::array({s["const"]}));
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) return InvalidArgument("tool parameter '{}': bad enum", path);
    return literal_list(s["enum"]);
  }
  std::string pattern;
  if (s.contains("format")) {
    const std::string* re =
        s["format"].is_string() ? JsonStringFormatRegex(s["format"].get<std::string>()) : nullptr;
    if (re == nullptr) return Unimplemented("tool parameter '{}': unsupported format", path);
    pattern = *re;
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string() || !pattern.empty()) {
      return InvalidArgument("tool parameter '{}': bad pattern (or with format)", path);
    }
    pattern = s["pattern"].get<std::string>();
  }
  if (!pattern.empty()) {
    if (pattern.find('<') != std::string::npos) {
      return Unimplemented("tool parameter '{}': a pattern with '<'", path);
    }
    Seq seq;
    MX_RETURN_IF_ERROR(CompileRegex(b, pattern, {}, &seq));
    *out = b.Alt({std::move(seq)}, "raw_pattern");
    return Status::Ok();
  }
  int64_t lo = 0, hi = -1;
  if (s.contains("minLength")) {
    if (!s["minLength"].is_number_unsigned()) return InvalidArgument("{}: bad minLength", path);
    lo = s["minLength"].get<int64_t>();
  }
  if (s.contains("maxLength")) {
    if (!s["maxLength"].is_number_unsigned()) return InvalidArgument("{}: bad maxLength", path);
    hi = s["maxLength"].get<int64_t>();
  }
  if (lo > b.limits().max_repeat || hi > b.limits().max_repeat) {
    return ResourceExhausted("tool parameter '{}': a length over the limit {}", path,
                             b.limits().max_repeat);
  }
  const Elem ch =
      CodepointSet(b, {{'\t', '\n'}, {'\r', '\r'}, {0x20, '<' - 1}, {'<' + 1, kMaxCodepoint}});
  *out = b.Repeat({ch}, static_cast<int32_t>(lo), static_cast<int32_t>(hi), "raw_string");
  return b.status();
}

// One function's `\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>` items; each `\n` is `nl`.
Status Arguments(GrammarBuilder& b, const Json& fn, const JsonOptions& opt, const Seq& nl,
                 Seq* out) {
  const std::string name = fn["name"].get<std::string>();
  if (!fn.contains("parameters") || fn["parameters"].is_null()) return Status::Ok();
  const Json& params = fn["parameters"];
  if (!params.is_object()) return InvalidArgument("tool '{}': parameters must be an object", name);
  for (const auto& [k, v] : params.items()) {
    if (!kParameterKeywords.contains(k)) {
      return Unimplemented("tool '{}': parameters keyword '{}' is not supported", name, k);
    }
  }
  if (params.contains("type") && params["type"] != "object") {
    return InvalidArgument("tool '{}': parameters must be of type object", name);
  }
  if (!params.contains("properties")) return Status::Ok();
  if (!params["properties"].is_object()) {
    return InvalidArgument("tool '{}': parameters.properties must be an object", name);
  }
  std::set<std::string> required;
  if (params.contains("required")) {
    if (!params["required"].is_array())
      return InvalidArgument("tool '{}': required must be an array", name);
    for (const Json& r : params["required"]) {
      if (r.is_string()) required.insert(r.get<std::string>());
    }
  }
  JsonOptions jopt = opt;
  jopt.escape_lt = true;
  for (const auto& [key, schema] : params["properties"].items()) {
    const std::string path = name + "." + key;
    if (key.find('<') != std::string::npos) {
      return Unimplemented("tool parameter '{}': a name with '<'", path);
    }
    Elem value;
    if (IsRawString(schema)) {
      MX_RETURN_IF_ERROR(RawString(b, schema, path, &value));
    } else {
      Status s = CompileJsonSchema(b, schema, jopt, &value, &params);
      if (!s.ok()) return s.WithContext(fmt::format("tool parameter '{}'", path));
    }
    Seq item = nl;
    b.AppendLiteral("<arg_key>" + key + "</arg_key>", &item);
    item.insert(item.end(), nl.begin(), nl.end());
    b.AppendLiteral("<arg_value>", &item);
    item.push_back(value);
    b.AppendLiteral("</arg_value>", &item);
    if (required.contains(key)) {
      out->push_back(b.Alt({std::move(item)}, "arg"));
    } else {
      out->push_back(b.Alt({{}, std::move(item)}, "opt_arg"));
    }
  }
  return b.status();
}

}  // namespace

Result<Grammar> ToolCallGrammar(const Json& spec, const JsonOptions& opt,
                                const GrammarLimits& limits) {
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array()) {
    return InvalidArgument("a tool-call constraint needs a tools array");
  }
  const bool any = !spec.contains("name") || spec["name"].is_null();
  const bool after_open = spec.value("after_open", false);
  GrammarBuilder b(limits);
  // note: the forced form writes a newline between the parts (GLM-4.5's); once the model has
  // opened a call itself, its own form is taken with or without them (GLM-4.7 writes none).
  const Seq nl = after_open ? Seq{b.Alt({{}, b.Literal("\n")}, "nl")} : b.Literal("\n");
  std::vector<Seq> calls;
  for (const Json& t : spec["tools"]) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string()) {
      return InvalidArgument("every tool needs a function with a name");
    }
    const Json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!any && name != spec["name"].get<std::string>()) continue;
    if (name.empty() || name.find_first_of("<\n") != std::string::npos) {
      return InvalidArgument("tool name '{}' cannot be written in a tool call", name);
    }
    Seq call = b.Literal(after_open ? name : "<tool_call>" + name);
    MX_RETURN_IF_ERROR(Arguments(b, fn, opt, nl, &call));
    call.insert(call.end(), nl.begin(), nl.end());
    b.AppendLiteral("</tool_call>", &call);
    calls.push_back(std::move(call));
  }
  if (calls.empty()) {
    return InvalidArgument("{}", any ? std::string("no tools to call")
                                     : fmt::format("no tool named {}", spec["name"].dump()));
  }
  const Elem call = b.Alt(std::move(calls), "call");
  if (after_open) {  // the rest of one call: complete at its </tool_call>
    const uint32_t rest = b.NewRule("root");
    b.AddAlt(rest, {call});
    return b.Finish(rest);
  }
  const Elem lead = b.Alt({{}, b.Literal("\n")}, "lead");
  const uint32_t root = b.NewRule("root");
  if (any && spec.value("parallel", true)) {
    Seq more = b.Literal("\n");
    more.push_back(call);
    b.AddAlt(root, {lead, call, b.Star(std::move(more), "more_calls")});
  } else {
    b.AddAlt(root, {lead, call});
  }
  return b.Finish(root);
}

}  // namespace mx::grammar
