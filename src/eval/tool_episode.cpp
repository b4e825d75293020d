#include "eval/tool_episode.h"

#include <fmt/format.h>

namespace mx::eval {

using json = nlohmann::json;

namespace {

// Chat tool schemas as Anthropic tools ({name, description, input_schema}).
json AnthropicTools() {
  json out = json::array();
  for (const json& t : ToolSchemas()) {
    const json& f = t["function"];
    out.push_back({{"name", f["name"]},
                   {"description", f["description"]},
                   {"input_schema", f["parameters"]}});
  }
  return out;
}

// The transcript as Anthropic messages: assistant blocks (thinking, text, tool_use), and the
// tool results after an assistant turn gathered into one user message of tool_result blocks.
json AnthropicMessages(const json& messages) {
  json out = json::array();
  for (const json& m : messages) {
    const std::string role = m["role"];
    if (role == "system") continue;
    if (role == "user") {
      out.push_back({{"role", "user"}, {"content", m["content"]}});
    } else if (role == "assistant") {
      json blocks = json::array();
      if (m.contains("reasoning_content")) {
        blocks.push_back(
            {{"type", "thinking"}, {"thinking", m["reasoning_content"]}, {"signature", ""}});
      }
      if (!m["content"].get<std::string>().empty()) {
        blocks.push_back({{"type", "text"}, {"text", m["content"]}});
      }
      for (const json& c : m.value("tool_calls", json::array())) {
        json input = json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
        blocks.push_back({{"type", "tool_use"},
                          {"id", c["id"]},
                          {"name", c["function"]["name"]},
                          {"input", input.is_object() ? input : json::object()}});
      }
      if (blocks.empty()) blocks.push_back({{"type", "text"}, {"text", ""}});
      out.push_back({{"role", "assistant"}, {"content", blocks}});
    } else {  // tool
      json block = {
          {"type", "tool_result"}, {"tool_use_id", m["tool_call_id"]}, {"content", m["content"]}};
      if (!out.empty() && out.back()["role"] == "user" && out.back()["content"].is_array()) {
        out.back()["content"].push_back(block);
      } else {
        out.push_back({{"role", "user"}, {"content", json::array({block})}});
      }
    }
  }
  return out;
}

}  // namespace

Episode StartEpisode(const ToolTask& task, uint64_t seed) {
  Episode e;
  e.task = &task;
  e.seed = seed;
  e.store = InitialStore();
  e.messages.push_back({{"role", "system"}, {"content", Policy()}});
  e.messages.push_back({{"role", "user"}, {"content", task.user_turns.at(0)}});
  return e;
}

std::string EpisodeBody(const Episode& e, loadgen::Endpoint api, const std::string& model,
                        const Sampling& sampling) {
  json j;
  j["model"] = model;
  if (api == loadgen::Endpoint::kMessages) {
    j["system"] = Policy();
    j["messages"] = AnthropicMessages(e.messages);
    j["tools"] = AnthropicTools();
  } else {
    j["messages"] = e.messages;
    j["tools"] = ToolSchemas();
    j["max_completion_tokens"] = sampling.max_tokens;
    j["stream_options"] = {{"include_usage", true}};
    if (!sampling.chat_template_kwargs.is_null()) {
      j["chat_template_kwargs"] = sampling.chat_template_kwargs;
    }
  }
  j["max_tokens"] = sampling.max_tokens;
  j["temperature"] = sampling.temperature;
  if (api != loadgen::Endpoint::kMessages) j["seed"] = e.seed;
  j["stream"] = true;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Advance(Episode& e, const Response& r, int max_steps) {
  ++e.steps;
  e.attempts += r.attempts;
  if (!r.ok) {
    e.done = true;
    e.end = "error";
    e.error_kind = r.error_kind;
    e.error = r.error;
    return;
  }
  json a = {{"role", "assistant"}, {"content", r.content}};
  if (!r.reasoning.empty()) a["reasoning_content"] = r.reasoning;
  if (!r.tool_calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < r.tool_calls.size(); ++i) {
      const loadgen::ToolCall& c = r.tool_calls[i];
      const std::string id = c.id.empty() ? fmt::format("call_{}_{}", e.steps, i) : c.id;
      calls.push_back({{"id", id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    a["tool_calls"] = calls;
  }
  e.messages.push_back(a);
  if (!r.tool_calls.empty()) {
    for (const json& c : a["tool_calls"]) {
      const std::string result = RunTool(e.store, c["function"]["name"].get<std::string>(),
                                         c["function"]["arguments"].get<std::string>());
      e.messages.push_back({{"role", "tool"}, {"tool_call_id", c["id"]}, {"content", result}});
      ++e.tool_calls;
    }
  } else {
    e.answers.push_back(r.content);
    if (e.next_user < e.task->user_turns.size()) {
      e.messages.push_back({{"role", "user"}, {"content", e.task->user_turns[e.next_user++]}});
    } else {
      e.done = true;
      e.end = "answered";
      return;
    }
  }
  if (e.steps >= max_steps) {
    e.done = true;
    e.end = "max_steps";
  }
}

}  // namespace mx::eval
