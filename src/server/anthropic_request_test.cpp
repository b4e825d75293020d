// Anthropic Messages bodies -> the chat path: blocks become chat messages, tool_choice and
// thinking map to chat's options, and what cannot be served is a 400 naming it.
#include "server/anthropic_request.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

std::optional<ApiError> Parse(const std::string& body, ParsedRequest* out = nullptr,
                              bool count_tokens = false) {
  ParsedRequest r;
  auto e = ParseMessagesRequest(Json::parse(body), RequestLimits{}, count_tokens, &r);
  if (out != nullptr) *out = r;
  return e;
}

const char* kTools =
    R"("tools":[{"name":"add","description":"adds","input_schema":{"type":"object",
        "properties":{"a":{"type":"integer"}}}}])";

TEST(AnthropicRequest, BlocksBecomeChatMessages) {
  ParsedRequest r;
  auto e = Parse(std::string(R"({"model":"m","max_tokens":9,"system":[{"type":"text","text":"S"}],
      "stop_sequences":["X"],"temperature":0,"top_k":5,"metadata":{"user_id":"u"},)") +
                     kTools + R"(,"messages":[
        {"role":"user","content":"hi"},
        {"role":"assistant","content":[{"type":"thinking","thinking":"T","signature":"s"},
                                      {"type":"text","text":"A"},
                                      {"type":"tool_use","id":"toolu_1","name":"add",
                                       "input":{"a":1}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",
                                   "content":[{"type":"text","text":"2"}]},
                                  {"type":"tool_result","tool_use_id":"toolu_2","content":"bad",
                                   "is_error":true},
                                  {"type":"text","text":"next"}]}]})",
                 &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.kind, ApiKind::kMessages);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.gen.max_tokens, 9);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"X"});
  EXPECT_EQ(r.gen.sampling.top_k, 5);
  ASSERT_EQ(r.messages.size(), 6u) << r.messages.dump();
  EXPECT_EQ(r.messages[0], (Json{{"role", "system"}, {"content", "S"}}));
  EXPECT_EQ(r.messages[2]["reasoning_content"], "T");
  EXPECT_EQ(r.messages[2]["content"], "A");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], (Json{{"a", 1}}));
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "toolu_1");
  EXPECT_EQ(r.messages[3]["content"], "2");
  EXPECT_EQ(r.messages[4]["content"], "Error: bad");
  EXPECT_EQ(r.messages[5], (Json{{"role", "user"}, {"content", "next"}}));
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["properties"]["a"]["type"], "integer");
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_FALSE(r.constraint);
}

TEST(AnthropicRequest, ToolChoiceAndThinkingMapToChat) {
  ParsedRequest r;
  const std::string head =
      std::string(R"({"max_tokens":9,"messages":[{"role":"user","content":"q"}],)") + kTools;
  ASSERT_FALSE(Parse(head + R"(,"tool_choice":{"type":"tool","name":"add",
      "disable_parallel_tool_use":true}})",
                     &r));
  ASSERT_TRUE(r.constraint);
  EXPECT_EQ(r.constraint->kind, grammar::ConstraintKind::kToolCall);
  EXPECT_NE(r.constraint->text.find(R"("parallel":false)"), std::string::npos)
      << r.constraint->text;
  ASSERT_FALSE(Parse(head + R"(,"tool_choice":{"type":"any"}})", &r));
  EXPECT_NE(r.constraint->text.find(R"("parallel":true)"), std::string::npos);
  ASSERT_FALSE(Parse(head + R"(,"tool_choice":{"type":"none"}})", &r));
  EXPECT_FALSE(r.parse_tool_calls);
  EXPECT_TRUE(r.tools.is_null());
  ASSERT_FALSE(Parse(head + R"(,"thinking":{"type":"enabled","budget_tokens":1024}})", &r));
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r.thinking_budget, 1024);
  ASSERT_FALSE(Parse(head + R"(,"thinking":{"type":"adaptive"}})", &r));
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r.thinking_budget, -1);
  ASSERT_FALSE(Parse(head + R"(,"thinking":{"type":"disabled"}})", &r));
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  ASSERT_FALSE(
      Parse(head + R"(,"output_format":{"type":"json_schema","schema":{"type":"string"}}})", &r));
  EXPECT_EQ(r.constraint->kind, grammar::ConstraintKind::kJsonSchema);
}

TEST(AnthropicRequest, ErrorsNameWhatCannotBeServed) {
  struct Case {
    std::string body;
    std::string param;
    std::string says;
  };
  const std::string m = R"("messages":[{"role":"user","content":"q"}])";
  const Case cases[] = {
      {"{" + m + "}", "max_tokens", "required"},
      {R"({"max_tokens":4})", "messages", "required"},
      {R"({"max_tokens":4,"messages":[]})", "messages", "non-empty"},
      {R"({"max_tokens":4,"messages":[{"role":"system","content":"q"}]})", "messages[0].role",
       "user or assistant"},
      {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image",
          "source":{}}]}]})",
       "messages[0].content[0].type", "'image'"},
      {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"document"}]}]})",
       "messages[0].content[0].type", "'document'"},
      {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_use","id":"x",
          "name":"n","input":{}}]}]})",
       "messages[0].content[0].type", "tool_use"},
      {R"({"max_tokens":4,"messages":[{"role":"assistant","content":[{"type":"tool_use",
          "id":"x","name":"n","input":"{}"}]}]})",
       "messages[0].content[0].input", "object"},
      {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result",
          "tool_use_id":"x","content":[{"type":"image"}]}]}]})",
       "messages[0].content[0].content[0].type", "'image'"},
      {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result",
          "tool_use_id":"x","is_error":"yes"}]}]})",
       "messages[0].content[0].is_error", "boolean"},
      {"{\"max_tokens\":4," + m + R"(,"system":[{"type":"image"}]})", "system[0].type", "'image'"},
      {"{\"max_tokens\":4," + m + R"(,"tools":[{"type":"web_search_20250305","name":"w"}]})",
       "tools[0].type", "web_search_20250305"},
      {"{\"max_tokens\":4," + m + R"(,"tools":[{"name":"w"}]})", "tools[0].input_schema", "object"},
      {"{\"max_tokens\":4," + m + R"(,"tool_choice":{"type":"sometimes"}})", "tool_choice.type",
       "auto, any"},
      {"{\"max_tokens\":4," + m + R"(,"tool_choice":{"type":"tool","name":"nope"},
         "tools":[{"name":"w","input_schema":{}}]})",
       "tool_choice", "nope"},
      {"{\"max_tokens\":4," + m + R"(,"thinking":{"type":"enabled"}})", "thinking.budget_tokens",
       "positive"},
      {"{\"max_tokens\":4," + m + R"(,"stop_sequences":"X"})", "stop_sequences", "array"},
      {"{\"max_tokens\":4," + m + R"(,"metadata":"x"})", "metadata", "object"},
      {"{\"max_tokens\":0," + m + "}", "max_tokens", "[1,"},
      {"{\"max_tokens\":4," + m + R"(,"temperature":"hot"})", "temperature", "number"},
  };
  for (const Case& c : cases) {
    auto e = Parse(c.body);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
    EXPECT_NE(e->message.find(c.says), std::string::npos) << e->message;
  }
}

TEST(AnthropicRequest, StopSequencesAreLimited) {
  Json body = Json::parse(R"({"max_tokens":4,"messages":[{"role":"user","content":"q"}]})");
  RequestLimits limits;
  limits.max_stop = 2;
  body["stop_sequences"] = Json::array({"a", "b", "c"});
  ParsedRequest r;
  auto e = ParseMessagesRequest(body, limits, false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "stop_sequences");
  body["stop_sequences"] = Json::array({"a", "b"});
  EXPECT_FALSE(ParseMessagesRequest(body, limits, false, &r));
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  EXPECT_FALSE(Parse(R"({"messages":[{"role":"user","content":"q"}]})", nullptr, true));
}

TEST(AnthropicRequest, ErrorsTakeAnthropicShapeAndStatus) {
  ApiError e = BadRequest("x", "bad");
  EXPECT_EQ(e.ToJson(ErrorShape::kAnthropic),
            (Json{{"type", "error"},
                  {"error", {{"type", "invalid_request_error"}, {"message", "bad"}}}}));
  const std::pair<int, const char*> statuses[] = {
      {401, "authentication_error"}, {404, "not_found_error"}, {413, "request_too_large"},
      {429, "rate_limit_error"},     {500, "api_error"},       {503, "overloaded_error"}};
  for (auto [status, type] : statuses) {
    e.http_status = status;
    EXPECT_EQ(e.ToJson(ErrorShape::kAnthropic)["error"]["type"], type);
  }
  e.http_status = 503;
  EXPECT_EQ(e.StatusIn(ErrorShape::kAnthropic), 529);
  EXPECT_EQ(e.StatusIn(ErrorShape::kOpenAI), 503);
}

}  // namespace
}  // namespace mx::server
