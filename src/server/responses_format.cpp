// Responses objects and stream events.
#include "server/responses_format.h"

#include "server/openai_format.h"
#include "server/server_impl.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

ResponsesOutput::ResponsesOutput(std::string id, std::string model, int64_t created_at,
                                 ResponsesContext ctx, ResponseStore* store)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_at_(created_at),
      ctx_(std::move(ctx)),
      store_(store) {}

std::string ResponsesOutput::Event(const std::string& type, Json fields) {
  Json e{{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  return NamedSseEvent(type, e);
}

Json ResponsesOutput::Response(const std::string& status, const GenerationResult* r) const {
  Json j{{"id", id_},        {"object", "response"}, {"created_at", created_at_},
         {"status", status}, {"error", nullptr},     {"incomplete_details", nullptr},
         {"model", model_},  {"output", output_}};
  for (auto& [k, v] : ctx_.echo.items()) j[k] = v;
  if (j["tools"].is_null()) j["tools"] = Json::array();
  if (j["tool_choice"].is_null()) j["tool_choice"] = "auto";
  if (j["parallel_tool_calls"].is_null()) j["parallel_tool_calls"] = true;
  if (j["metadata"].is_null()) j["metadata"] = Json::object();
  if (j["text"].is_null()) j["text"] = Json{{"format", {{"type", "text"}}}};
  j["store"] = ctx_.store;
  j["truncation"] = "disabled";
  if (status == "incomplete") j["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
  if (r != nullptr && r->error) {
    j["error"] = Json{{"code", "server_error"}, {"message", r->error->message}};
  }
  j["usage"] = nullptr;
  if (r != nullptr) {
    j["usage"] = Json{{"input_tokens", r->prompt_tokens},
                      {"input_tokens_details", {{"cached_tokens", r->cached_tokens}}},
                      {"output_tokens", r->completion_tokens},
                      {"output_tokens_details", {{"reasoning_tokens", r->reasoning_tokens}}},
                      {"total_tokens", r->prompt_tokens + r->completion_tokens}};
  }
  return j;
}

std::string ResponsesOutput::Heartbeat() {
  return Event("response.in_progress", {{"response", Response("in_progress", nullptr)}});
}

std::string ResponsesOutput::StreamStart() {
  const Json r = Response("in_progress", nullptr);
  std::string out = Event("response.created", {{"response", r}});
  return out + Event("response.in_progress", {{"response", r}});
}

std::string ResponsesOutput::OpenItem(Json item) {
  std::string out = CloseItem();
  output_.push_back(std::move(item));
  open_ = true;
  const size_t index = output_.size() - 1;
  Json& it = output_.back();
  out += Event("response.output_item.added", {{"output_index", index}, {"item", it}});
  if (it["type"] == "message" || it["type"] == "reasoning") {
    Json part = it["type"] == "message"
                    ? Json{{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}
                    : Json{{"type", "reasoning_text"}, {"text", ""}};
    it["content"].push_back(part);
    out += Event(
        "response.content_part.added",
        {{"item_id", it["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  }
  return out;
}

std::string ResponsesOutput::CloseItem() {
  if (!open_) return "";
  open_ = false;
  const size_t index = output_.size() - 1;
  Json& it = output_.back();
  std::string out;
  const Json common{{"item_id", it["id"]}, {"output_index", index}};
  auto with = [&](Json extra) {
    Json e = common;
    for (auto& [k, v] : extra.items()) e[k] = std::move(v);
    return e;
  };
  if (it["type"] == "message" || it["type"] == "reasoning") {
    const Json& part = it["content"][0];
    const char* done =
        it["type"] == "message" ? "response.output_text.done" : "response.reasoning_text.done";
    out += Event(done, with({{"content_index", 0}, {"text", part["text"]}}));
    out += Event("response.content_part.done", with({{"content_index", 0}, {"part", part}}));
  } else {
    out += Event("response.function_call_arguments.done",
                 with({{"name", it["name"]}, {"arguments", it["arguments"]}}));
  }
  it["status"] = "completed";
  if (it["type"] == "reasoning") it.erase("status");
  return out + Event("response.output_item.done", {{"output_index", index}, {"item", it}});
}

std::string ResponsesOutput::Delta(const ChoiceDelta& d) {
  std::string out;
  auto text = [&](const char* item_type, const char* prefix, const char* event,
                  const std::string& delta) {
    if (delta.empty()) return;
    if (!open_ || output_.back()["type"] != item_type) {
      Json item{{"id", NewResponseId(prefix)}, {"type", item_type}};
      if (std::string_view(item_type) == "message") {
        item["status"] = "in_progress";
        item["role"] = "assistant";
      } else {
        item["summary"] = Json::array();
      }
      item["content"] = Json::array();
      out += OpenItem(std::move(item));
    }
    Json& it = output_.back();
    Json& t = it["content"][0]["text"];
    t = t.get<std::string>() + delta;
    Json e{{"item_id", it["id"]},
           {"output_index", output_.size() - 1},
           {"content_index", 0},
           {"delta", delta}};
    if (std::string_view(item_type) == "message") e["logprobs"] = Json::array();
    out += Event(event, std::move(e));
  };
  text("reasoning", "rs_", "response.reasoning_text.delta", d.reasoning);
  text("message", "msg_", "response.output_text.delta", d.content);
  for (const ToolCallDelta& c : d.tool_calls) {
    out += OpenItem(Json{{"id", NewResponseId("fc_")},
                         {"type", "function_call"},
                         {"status", "in_progress"},
                         {"call_id", c.id},
                         {"name", c.name},
                         {"arguments", ""}});
    output_.back()["arguments"] = c.arguments;
    out += Event("response.function_call_arguments.delta", {{"item_id", output_.back()["id"]},
                                                            {"output_index", output_.size() - 1},
                                                            {"delta", c.arguments}});
  }
  return out;
}

Json ResponsesOutput::AsChatMessage() const {
  Json m{{"role", "assistant"}, {"content", ""}};
  for (const Json& it : output_) {
    if (it["type"] == "message") {
      m["content"] = m["content"].get<std::string>() + it["content"][0]["text"].get<std::string>();
    } else if (it["type"] == "reasoning") {
      m["reasoning_content"] =
          m.value("reasoning_content", "") + it["content"][0]["text"].get<std::string>();
    } else {
      if (!m.contains("tool_calls")) m["tool_calls"] = Json::array();
      Json args = Json::parse(it["arguments"].get<std::string>(), nullptr, false);
      m["tool_calls"].push_back(
          Json{{"id", it["call_id"]},
               {"type", "function"},
               {"function",
                {{"name", it["name"]}, {"arguments", args.is_object() ? args : Json::object()}}}});
    }
  }
  return m;
}

void ResponsesOutput::Finish(const GenerationResult& r) {
  pending_ = CloseItem();
  status_ = r.error ? "failed" : r.total->finish_reason == "length" ? "incomplete" : "completed";
  final_ = Response(status_, &r);
  if (store_ != nullptr && !r.error) {
    StoredResponse s;
    s.response = final_;
    s.input_items = ctx_.input_items;
    s.conversation = ctx_.conversation;
    s.conversation.push_back(AsChatMessage());
    store_->Put(id_, std::move(s));
  }
}

std::string ResponsesOutput::StreamEnd(const GenerationResult&) {
  return pending_ + Event("response." + status_, {{"response", final_}});
}

Json ResponsesOutput::Final(const GenerationResult&) { return final_; }

}  // namespace mx::server
