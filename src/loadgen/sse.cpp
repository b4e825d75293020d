#include "loadgen/sse.h"

#include <nlohmann/json.hpp>

namespace mx::loadgen {

std::vector<std::string> SseParser::Feed(std::string_view bytes) {
  std::vector<std::string> out;
  buf_.append(bytes);
  size_t start = 0;
  for (;;) {
    size_t nl = buf_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(buf_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = nl + 1;
    if (line.substr(0, 5) != "data:") continue;  // blank, comment, event:, id:, retry:
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    out.emplace_back(line);
  }
  buf_.erase(0, start);
  return out;
}

namespace {

std::optional<int> IntField(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

void AppendString(const nlohmann::json& obj, const char* key, std::string& out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) out += it->get_ref<const std::string&>();
}

void ReadUsage(const nlohmann::json& u, StreamChunk& c) {
  // OpenAI chat/completions.
  if (auto v = IntField(u, "prompt_tokens")) c.prompt_tokens = v;
  if (auto v = IntField(u, "completion_tokens")) c.completion_tokens = v;
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) {
    c.cached_tokens = IntField(*d, "cached_tokens");
  }
  // Responses: input_tokens is the whole prompt, input_tokens_details.cached_tokens its hits.
  if (auto d = u.find("input_tokens_details"); d != u.end() && d->is_object()) {
    c.prompt_tokens = IntField(u, "input_tokens");
    c.cached_tokens = IntField(*d, "cached_tokens");
  } else if (auto in = IntField(u, "input_tokens")) {
    // Messages: input_tokens is the part neither read from nor written to the cache.
    const int read = IntField(u, "cache_read_input_tokens").value_or(0);
    const int created = IntField(u, "cache_creation_input_tokens").value_or(0);
    c.prompt_tokens = *in + read + created;
    if (u.contains("cache_read_input_tokens")) c.cached_tokens = read;
  }
  if (auto v = IntField(u, "output_tokens")) c.completion_tokens = v;
}

// Anthropic Messages and OpenAI Responses events (the payload has a string "type").
void ParseTypedEvent(const nlohmann::json& j, const std::string& type, StreamChunk& c) {
  auto str = [](const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto index = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
  };
  if (type == "content_block_start") {
    if (auto b = j.find("content_block");
        b != j.end() && b->is_object() && str(*b, "type") == "tool_use") {
      c.tool_calls.push_back({index("index"), str(*b, "id"), str(*b, "name"), ""});
    }
  } else if (type == "response.output_item.added") {
    if (auto it = j.find("item");
        it != j.end() && it->is_object() && str(*it, "type") == "function_call") {
      c.tool_calls.push_back(
          {index("output_index"), str(*it, "call_id"), str(*it, "name"), str(*it, "arguments")});
    }
  } else if (type == "response.function_call_arguments.delta") {
    c.tool_calls.push_back({index("output_index"), "", "", str(j, "delta")});
  } else if (type == "message_start") {
    if (auto m = j.find("message"); m != j.end() && m->is_object()) {
      if (auto u = m->find("usage"); u != m->end() && u->is_object()) ReadUsage(*u, c);
    }
  } else if (type == "content_block_delta") {
    if (auto d = j.find("delta"); d != j.end() && d->is_object()) {
      const std::string dt = str(*d, "type");
      if (dt == "thinking_delta") {
        c.reasoning = str(*d, "thinking");
        c.text = c.reasoning;
      } else if (dt == "text_delta") {
        c.text = str(*d, "text");
      } else if (dt == "input_json_delta") {
        c.tool_calls.push_back({index("index"), "", "", str(*d, "partial_json")});
      }
    }
  } else if (type == "message_delta") {
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) ReadUsage(*u, c);
  } else if (type == "message_stop") {
    c.done = true;
  } else if (type == "response.output_text.delta") {
    c.text = str(j, "delta");
  } else if (type == "response.reasoning_text.delta" ||
             type == "response.reasoning_summary_text.delta") {
    c.reasoning = str(j, "delta");
    c.text = c.reasoning;
  } else if (type == "response.completed" || type == "response.incomplete" ||
             type == "response.failed") {
    if (auto r = j.find("response"); r != j.end() && r->is_object()) {
      if (auto u = r->find("usage"); u != r->end() && u->is_object()) ReadUsage(*u, c);
      if (type == "response.failed") {
        auto e = r->find("error");
        c.error = e != r->end() && e->is_object() ? str(*e, "message") : std::string();
        if (c.error.empty()) c.error = "response.failed";
      }
    }
    c.done = type != "response.failed";
  } else if (type == "error" && c.error.empty()) {
    c.error = str(j, "message");  // Responses' error event; Messages' carries "error" (above)
    if (c.error.empty()) c.error = "error event";
  }
}

}  // namespace

std::optional<StreamChunk> ParseStreamChunk(std::string_view payload) {
  StreamChunk c;
  if (payload == "[DONE]") {
    c.done = true;
    return c;
  }
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  // "error": null is no error (some servers put the field on every chunk).
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) {
      c.error = (*e)["message"].get<std::string>();
    } else {
      c.error = e->dump();
    }
    if (c.error.empty()) c.error = "error";
  }
  if (auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty()) {
    c.has_choices = true;
    const nlohmann::json& c0 = (*ch)[0];
    if (c0.is_object()) {
      AppendString(c0, "text", c.text);
      if (auto d = c0.find("delta"); d != c0.end() && d->is_object()) {
        // Reasoning counts as output, as in the newest sglang. vLLM renamed reasoning_content
        // to reasoning; a server that sends both names carries the same text twice: count it
        // once, under the old name when it is there.
        AppendString(*d, "reasoning_content", c.reasoning);
        if (c.reasoning.empty()) AppendString(*d, "reasoning", c.reasoning);
        c.text += c.reasoning;
        AppendString(*d, "content", c.text);
        if (auto tc = d->find("tool_calls"); tc != d->end() && tc->is_array()) {
          for (const nlohmann::json& t : *tc) {
            if (!t.is_object()) continue;
            ToolCallPiece p;
            p.index = IntField(t, "index").value_or(0);
            AppendString(t, "id", p.id);
            if (auto f = t.find("function"); f != t.end() && f->is_object()) {
              AppendString(*f, "name", p.name);
              AppendString(*f, "arguments", p.arguments);
            }
            c.tool_calls.push_back(std::move(p));
          }
        }
      }
    }
  }
  if (auto t = j.find("type"); t != j.end() && t->is_string() && !c.has_choices) {
    ParseTypedEvent(j, t->get<std::string>(), c);
    return c;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) ReadUsage(*u, c);
  return c;
}

}  // namespace mx::loadgen
