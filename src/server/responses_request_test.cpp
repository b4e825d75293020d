// Responses bodies -> the chat path: items become chat messages, previous_response_id prepends
// the stored conversation, and what cannot be served is a 400 (a 404 for an unknown id).
#include "server/responses_request.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

std::optional<ApiError> Parse(const std::string& body, ResponseStore& store, ParsedRequest* r,
                              ResponsesContext* ctx) {
  return ParseResponsesRequest(Json::parse(body), RequestLimits{}, store, r, ctx);
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  ResponseStore store({});
  ParsedRequest r;
  ResponsesContext ctx;
  auto e = Parse(R"({"model":"m","instructions":"I","max_output_tokens":7,"store":false,
      "reasoning":{"effort":"minimal"},"text":{"format":{"type":"json_object"}},
      "tools":[{"type":"function","name":"add","parameters":{"type":"object"}}],
      "input":[{"role":"developer","content":"D"},
               {"type":"message","role":"user","content":[{"type":"input_text","text":"U"}]},
               {"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"R"}]},
               {"type":"message","role":"assistant","content":[{"type":"output_text","text":"A"}]},
               {"type":"function_call","call_id":"c1","name":"add","arguments":"{\"a\":1}"},
               {"type":"function_call_output","call_id":"c1","output":"2"}]})",
                 store, &r, &ctx);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.kind, ApiKind::kResponses);
  EXPECT_EQ(r.gen.max_tokens, 7);
  EXPECT_FALSE(ctx.store);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  ASSERT_TRUE(r.constraint);
  EXPECT_EQ(r.constraint->kind, grammar::ConstraintKind::kJsonObject);
  ASSERT_EQ(r.messages.size(), 5u) << r.messages.dump();
  EXPECT_EQ(r.messages[0], (Json{{"role", "system"}, {"content", "I"}}));
  EXPECT_EQ(r.messages[1], (Json{{"role", "system"}, {"content", "D"}}));
  EXPECT_EQ(r.messages[2], (Json{{"role", "user"}, {"content", "U"}}));
  EXPECT_EQ(r.messages[3]["reasoning_content"], "R");
  EXPECT_EQ(r.messages[3]["content"], "A");
  EXPECT_EQ(r.messages[3]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.messages[3]["tool_calls"][0]["function"]["arguments"], (Json{{"a", 1}}));
  EXPECT_EQ(r.messages[4]["role"], "tool");
  EXPECT_EQ(r.messages[4]["tool_call_id"], "c1");
  // The conversation kept for a continuation leaves the instructions out; every item has an id.
  EXPECT_EQ(ctx.conversation.size(), 4u);
  ASSERT_EQ(ctx.input_items.size(), 6u);
  for (const Json& it : ctx.input_items) EXPECT_TRUE(it["id"].is_string()) << it.dump();
  EXPECT_EQ(ctx.echo["instructions"], "I");
}

TEST(ResponsesRequest, PreviousResponseIdPrependsTheStoredConversation) {
  ResponseStore store({});
  StoredResponse prev;
  prev.conversation = Json::array(
      {Json{{"role", "user"}, {"content", "Q"}}, Json{{"role", "assistant"}, {"content", "A"}}});
  store.Put("resp_1", prev);
  ParsedRequest r;
  ResponsesContext ctx;
  ASSERT_FALSE(Parse(R"({"previous_response_id":"resp_1","input":"next"})", store, &r, &ctx));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["content"], "Q");
  EXPECT_EQ(r.messages[2]["content"], "next");
  EXPECT_EQ(ctx.input_items.size(), 1u);
  auto e = Parse(R"({"previous_response_id":"resp_2","input":"x"})", store, &r, &ctx);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 404);
  EXPECT_NE(e->message.find("resp_2"), std::string::npos);
}

TEST(ResponsesRequest, ReasoningEffortIsThinkingAndAnEffort) {
  struct Case {
    const char* effort;
    bool thinking;
    const char* kept;  // the effort the handler maps to a budget ("": thinking off)
  };
  for (const Case& c :
       {Case{"none", false, ""}, Case{"minimal", false, ""}, Case{"low", true, "low"},
        Case{"medium", true, "medium"}, Case{"high", true, "high"}, Case{"xhigh", true, "xhigh"}}) {
    ResponseStore store({});
    ParsedRequest r;
    ResponsesContext ctx;
    const std::string body =
        std::string(R"({"input":"x","reasoning":{"effort":")") + c.effort + R"("}})";
    ASSERT_FALSE(Parse(body, store, &r, &ctx));
    EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], c.thinking) << c.effort;
    EXPECT_EQ(r.reasoning_effort, c.kept) << c.effort;
    EXPECT_EQ(r.thinking_budget, -1) << c.effort;
  }
}

TEST(ResponsesRequest, ErrorsNameWhatCannotBeServed) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "input"},
      {R"({"input":[]})", "input"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image"}]}]})",
       "input[0].content[0].type"},
      {R"({"input":[{"type":"web_search_call"}]})", "input[0].type"},
      {R"({"input":[{"role":"tool","content":"x"}]})", "input[0].role"},
      {R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"1"}]})",
       "input[0].arguments"},
      {R"({"input":"x","tools":[{"type":"code_interpreter"}]})", "tools[0].type"},
      {R"({"input":"x","tools":[{"type":"function"}]})", "tools[0].name"},
      {R"({"input":"x","tool_choice":{"type":"mcp"}})", "tool_choice"},
      {R"({"input":"x","text":{"format":{"type":"json_schema"}}})", "text.format.schema"},
      {R"({"input":"x","reasoning":{"effort":"max"}})", "reasoning.effort"},
      {R"({"input":"x","max_output_tokens":0})", "max_output_tokens"},
      {R"({"input":"x","instructions":3})", "instructions"},
      {R"({"input":"x","background":true})", "background"},
  };
  for (const Case& c : cases) {
    ResponseStore store({});
    ParsedRequest r;
    ResponsesContext ctx;
    auto e = Parse(c.body, store, &r, &ctx);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
  }
}

}  // namespace
}  // namespace mx::server
