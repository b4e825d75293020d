// Anthropic message objects and stream events.
#include "server/anthropic_format.h"

#include "server/openai_format.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

AnthropicOutput::AnthropicOutput(std::string id, std::string model, int64_t prompt_tokens)
    : id_(std::move(id)), model_(std::move(model)), prompt_tokens_(prompt_tokens) {}

std::string AnthropicOutput::StreamStart() {
  Json msg{{"id", id_},
           {"type", "message"},
           {"role", "assistant"},
           {"model", model_},
           {"content", Json::array()},
           {"stop_reason", nullptr},
           {"stop_sequence", nullptr},
           {"usage", Json{{"input_tokens", prompt_tokens_},
                          {"cache_creation_input_tokens", 0},
                          {"cache_read_input_tokens", 0},
                          {"output_tokens", 0}}}};
  // note: the prompt is prefilling now; the ping tells the client the stream is alive.
  return NamedSseEvent("message_start", Json{{"type", "message_start"}, {"message", msg}}) +
         Heartbeat();
}

std::string AnthropicOutput::Heartbeat() { return NamedSseEvent("ping", Json{{"type", "ping"}}); }

std::string AnthropicOutput::CloseOpen() {
  if (open_.empty()) return "";
  open_.clear();
  return NamedSseEvent("content_block_stop",
                       Json{{"type", "content_block_stop"}, {"index", blocks_.size() - 1}});
}

std::string AnthropicOutput::Open(const Json& start) {
  std::string out = CloseOpen();
  blocks_.push_back(start);
  open_ = start["type"].get<std::string>();
  return out + NamedSseEvent("content_block_start", Json{{"type", "content_block_start"},
                                                         {"index", blocks_.size() - 1},
                                                         {"content_block", start}});
}

std::string AnthropicOutput::Delta(const ChoiceDelta& d) {
  std::string out;
  auto text_delta = [&](const char* type, const char* field, const char* delta_type,
                        const std::string& text) {
    if (text.empty()) return;
    if (open_ != type) {
      Json start{{"type", type}, {field, ""}};
      if (std::string_view(type) == "thinking") start["signature"] = "";
      out += Open(start);
    }
    Json& b = blocks_.back()[field];
    b = b.get<std::string>() + text;
    out += NamedSseEvent("content_block_delta",
                         Json{{"type", "content_block_delta"},
                              {"index", blocks_.size() - 1},
                              {"delta", Json{{"type", delta_type}, {field, text}}}});
  };
  text_delta("thinking", "thinking", "thinking_delta", d.reasoning);
  text_delta("text", "text", "text_delta", d.content);
  for (const ToolCallDelta& c : d.tool_calls) {
    // ChoiceOutput's "call_..." ids become Anthropic's "toolu_...".
    const std::string id = "toolu_" + (c.id.starts_with("call_") ? c.id.substr(5) : c.id);
    out +=
        Open(Json{{"type", "tool_use"}, {"id", id}, {"name", c.name}, {"input", Json::object()}});
    Json input = Json::parse(c.arguments, nullptr, false);
    blocks_.back()["input"] = input.is_object() ? input : Json::object();
    out += NamedSseEvent(
        "content_block_delta",
        Json{{"type", "content_block_delta"},
             {"index", blocks_.size() - 1},
             {"delta", Json{{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
    out += CloseOpen();
  }
  return out;
}

void AnthropicOutput::Finish(const GenerationResult& r) {
  const ChoiceDelta& t = *r.total;
  const std::string f = t.finish_reason.value_or("abort");
  if (f == "tool_calls") {
    stop_reason_ = "tool_use";
  } else if (f == "length") {
    stop_reason_ = "max_tokens";
  } else if (f == "stop" && !t.matched_stop.empty()) {
    stop_reason_ = "stop_sequence";
    stop_sequence_ = t.matched_stop;
  }
}

Json AnthropicOutput::Usage(const GenerationResult& r) const {
  // Anthropic counts input in three parts that add up to the prompt: read from the cache,
  // written to it (nothing is billed for that here) and the rest.
  return Json{{"input_tokens", r.prompt_tokens - r.cached_tokens},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", r.cached_tokens},
              {"output_tokens", r.completion_tokens}};
}

std::string AnthropicOutput::StreamEnd(const GenerationResult& r) {
  std::string out = CloseOpen();
  if (r.error) return out + NamedSseEvent("error", r.error->ToJson(ErrorShape::kAnthropic));
  out += NamedSseEvent(
      "message_delta",
      Json{{"type", "message_delta"},
           {"delta", Json{{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
           {"usage", Usage(r)}});
  return out + NamedSseEvent("message_stop", Json{{"type", "message_stop"}});
}

Json AnthropicOutput::Final(const GenerationResult& r) {
  return Json{{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", blocks_},
              {"stop_reason", stop_reason_},
              {"stop_sequence", stop_sequence_},
              {"usage", Usage(r)}};
}

}  // namespace mx::server
