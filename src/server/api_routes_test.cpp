// /v1/messages and /v1/responses over a scripted engine: with parallel tool calls off, a model
// that writes two calls and more text gets one call and its request ends there, on every API
// and streaming or not.
#include <gtest/gtest.h>

#include "server/server_test_harness.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

const char* kTwoCalls =
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>"
    "and more text";

const char* kWeather = R"({"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"}}}})";

// The event payloads of an SSE body that names its events.
std::vector<Json> Events(const std::string& body) {
  std::vector<Json> out;
  for (const std::string& d : SseData(body)) out.push_back(Json::parse(d));
  return out;
}

TEST(ApiRoutes, ParallelToolCallsOffEndsAfterTheFirstCall) {
  Harness h(kTwoCalls);
  const std::string msgs = R"("messages":[{"role":"user","content":"weather?"}])";
  // Chat, tool_choice auto.
  const std::string chat = std::string("{") + msgs + R"(,"parallel_tool_calls":false,
      "chat_template_kwargs":{"enable_thinking":false},"tools":[{"type":"function","function":)" +
                           kWeather + "}]";
  auto r = h.Post("/v1/chat/completions", chat + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << r->body;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 60) << "the request went on";
  // Without the bound both calls come back.
  r = h.Post("/v1/chat/completions", chat + R"(,"parallel_tool_calls":true})");
  EXPECT_EQ(Json::parse(r->body)["choices"][0]["message"]["tool_calls"].size(), 2u);

  // Messages, auto with disable_parallel_tool_use, streaming and not.
  const std::string anthropic_tool =
      R"({"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}})";
  const std::string m = std::string(R"({"max_tokens":200,"thinking":{"type":"disabled"},)") + msgs +
                        R"(,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
      "tools":[)" + anthropic_tool +
                        "]";
  r = h.Post("/v1/messages", m + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  j = Json::parse(r->body);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 1u) << r->body;
  EXPECT_EQ(j["content"][0]["input"], (Json{{"city", "Paris"}}));
  int tool_blocks = 0;
  std::string stop;
  for (const Json& e : Events(h.Post("/v1/messages", m + R"(,"stream":true})")->body)) {
    if (e["type"] == "content_block_start") tool_blocks += e["content_block"]["type"] == "tool_use";
    if (e["type"] == "message_delta") stop = e["delta"]["stop_reason"];
  }
  EXPECT_EQ(tool_blocks, 1);
  EXPECT_EQ(stop, "tool_use");

  // Responses, parallel_tool_calls false.
  const std::string resp = R"({"input":"weather?","parallel_tool_calls":false,
      "reasoning":{"effort":"none"},"tools":[{"type":"function","name":"get_weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]})";
  r = h.Post("/v1/responses", resp);
  ASSERT_EQ(r->status, 200) << r->body;
  j = Json::parse(r->body);
  ASSERT_EQ(j["output"].size(), 1u) << r->body;
  EXPECT_EQ(j["output"][0]["type"], "function_call");
  EXPECT_EQ(j["output"][0]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(j["status"], "completed");
}

}  // namespace
}  // namespace mx::server
