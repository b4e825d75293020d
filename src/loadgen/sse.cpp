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
        std::string reasoning;
        AppendString(*d, "reasoning_content", reasoning);
        if (reasoning.empty()) AppendString(*d, "reasoning", reasoning);
        c.text += reasoning;
        AppendString(*d, "content", c.text);
      }
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    c.prompt_tokens = IntField(*u, "prompt_tokens");
    c.completion_tokens = IntField(*u, "completion_tokens");
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object()) {
      c.cached_tokens = IntField(*d, "cached_tokens");
    }
  }
  return c;
}

}  // namespace mx::loadgen
