// Request validation: every error class is a 400 naming the parameter; good requests map to
// native fields; unknown fields are ignored.
#include "server/request_parse.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

std::optional<ApiError> Chat(const std::string& body, ParsedRequest* out = nullptr) {
  Json j;
  if (auto e = ParseBody(body, &j, RequestLimits{}.max_json_depth)) return e;
  ParsedRequest r;
  auto e = ParseChatRequest(j, RequestLimits{}, &r);
  if (out != nullptr) *out = r;
  return e;
}

std::optional<ApiError> Completion(const std::string& body, ParsedRequest* out = nullptr) {
  Json j;
  if (auto e = ParseBody(body, &j, RequestLimits{}.max_json_depth)) return e;
  ParsedRequest r;
  auto e = ParseCompletionRequest(j, RequestLimits{}, &r);
  if (out != nullptr) *out = r;
  return e;
}

const char* kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

TEST(RequestParse, TopLogprobsLimitIsTheEnginesOwn) {
  const auto body = [](int n) {
    return std::string("{") + kMsgs + R"(,"logprobs":true,"top_logprobs":)" + std::to_string(n) +
           "}";
  };
  ParsedRequest r;
  EXPECT_FALSE(Chat(body(kMaxTopLogprobs), &r));
  EXPECT_EQ(r.gen.top_logprobs, kMaxTopLogprobs);
  auto e = Chat(body(kMaxTopLogprobs + 1));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "top_logprobs");
}

TEST(RequestParse, ChatFieldsMapToNative) {
  ParsedRequest r;
  auto e = Chat(std::string("{") + kMsgs +
                    R"(,"max_completion_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,
                   "min_p":0.1,"seed":42,"stop":["\n"],"presence_penalty":0.5,
                   "frequency_penalty":-0.5,"n":2,"logprobs":true,"top_logprobs":3,
                   "ignore_eos":true,"min_tokens":2,"stream":true,
                   "stream_options":{"include_usage":true},
                   "chat_template_kwargs":{"enable_thinking":false},
                   "response_format":{"type":"json_object"},"some_unknown_field":[1,2]})",
                &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.gen.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(r.gen.sampling.top_k, 3);
  EXPECT_EQ(r.gen.sampling.seed, 42u);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.gen.top_logprobs, 3);
  EXPECT_TRUE(r.gen.ignore_eos);
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(RequestParse, ErrorsNameTheParameter) {
  struct Case {
    std::string body;
    std::string param;
  };
  const std::string m = kMsgs;
  for (const Case& c : std::vector<Case>{
           {"{not json", ""},
           {"[1,2]", ""},
           {"{}", "messages"},
           {R"({"messages":"hi"})", "messages"},
           {R"({"messages":[]})", "messages"},
           {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
           {R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
           {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
           {"{" + m + R"(,"temperature":"hot"})", "temperature"},
           {"{" + m + R"(,"temperature":-1})", "temperature"},
           {"{" + m + R"(,"top_p":0})", "top_p"},
           {"{" + m + R"(,"top_p":1.5})", "top_p"},
           {"{" + m + R"(,"max_tokens":0})", "max_tokens"},
           {"{" + m + R"(,"max_tokens":1.5})", "max_tokens"},
           {"{" + m + R"(,"max_completion_tokens":-3})", "max_completion_tokens"},
           {"{" + m + R"(,"n":0})", "n"},
           {"{" + m + R"(,"n":1000})", "n"},
           {"{" + m + R"(,"stop":7})", "stop"},
           {"{" + m + R"(,"stop":["a",1]})", "stop"},
           {"{" + m + R"(,"presence_penalty":3})", "presence_penalty"},
           {"{" + m + R"(,"stream":"yes"})", "stream"},
           {"{" + m + R"(,"top_logprobs":50,"logprobs":true})", "top_logprobs"},
           {"{" + m + R"(,"top_logprobs":2})", "top_logprobs"},
           {"{" + m + R"(,"stream_options":{"include_usage":1}})", "stream_options.include_usage"},
           {"{" + m + R"(,"response_format":{"type":"json_schema"}})", "response_format"},
           {"{" + m + R"(,"tools":{}})", "tools"},
           {"{" + m + R"(,"tool_choice":"sometimes"})", "tool_choice"},
           {"{" + m + R"(,"chat_template_kwargs":[]})", "chat_template_kwargs"},
       }) {
    auto e = Chat(c.body);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
    EXPECT_EQ(e->ToJson()["error"]["type"], "invalid_request_error");
  }
}

TEST(RequestParse, ThinkingBudgetUnderEveryName) {
  ParsedRequest r;
  ASSERT_FALSE(Chat(std::string("{") + kMsgs + "}", &r));
  EXPECT_EQ(r.thinking_budget, -1);
  EXPECT_EQ(r.reasoning_effort, "");
  for (const char* field : {R"("thinking_budget":12)", R"("thinking_token_budget":12)",
                            R"("custom_params":{"thinking_budget":12})"}) {
    ASSERT_FALSE(Chat(std::string("{") + kMsgs + "," + field + "}", &r)) << field;
    EXPECT_EQ(r.thinking_budget, 12) << field;
  }
  ASSERT_FALSE(Chat(std::string("{") + kMsgs + R"(,"thinking_budget":0})", &r));
  EXPECT_EQ(r.thinking_budget, 0);
  ASSERT_FALSE(Chat(std::string("{") + kMsgs + R"(,"reasoning_effort":"low"})", &r));
  EXPECT_EQ(r.reasoning_effort, "low");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  ASSERT_FALSE(Chat(
      std::string("{") + kMsgs + R"(,"reasoning_effort":"none","chat_template_kwargs":{"x":1}})",
      &r));
  EXPECT_EQ(r.reasoning_effort, "");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  // Out of range, wrong types and unknown efforts are 400s naming the field.
  struct Bad {
    const char* field;
    const char* param;
  };
  for (const Bad& b :
       {Bad{R"("thinking_budget":-1)", "thinking_budget"},
        Bad{R"("thinking_budget":"9")", "thinking_budget"},
        Bad{R"("thinking_token_budget":2000000000)", "thinking_token_budget"},
        Bad{R"("custom_params":[1])", "custom_params"},
        Bad{R"("custom_params":{"thinking_budget":1.5})", "custom_params.thinking_budget"},
        Bad{R"("reasoning_effort":"max")", "reasoning_effort"},
        Bad{R"("reasoning_effort":3)", "reasoning_effort"}}) {
    auto e = Chat(std::string("{") + kMsgs + "," + b.field + "}");
    ASSERT_TRUE(e) << b.field;
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, b.param) << b.field;
  }
}

TEST(RequestParse, ToolCallArgumentsBecomeObjects) {
  ParsedRequest r;
  auto e = Chat(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"1",
      "type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},
      {"role":"tool","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}]})",
                &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.messages[0]["content"], "ab");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["x"], 1);
  EXPECT_TRUE(r.parse_tool_calls);
  auto bad = Chat(R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{
      "function":{"name":"f","arguments":"{oops"}}]}]})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->param, "messages[0].tool_calls[0].function.arguments");
}

TEST(RequestParse, CompletionPrompts) {
  ParsedRequest r;
  ASSERT_FALSE(Completion(R"({"prompt":"12+34="})", &r));
  EXPECT_EQ(r.gen.max_tokens, 16);  // OpenAI's default for completions
  ASSERT_EQ(r.prompts.size(), 1u);
  ASSERT_FALSE(Completion(R"({"prompt":[1,2,3],"logprobs":2})", &r));
  EXPECT_EQ(std::get<std::vector<int32_t>>(r.prompts[0]).size(), 3u);
  EXPECT_EQ(r.gen.top_logprobs, 2);
  ASSERT_FALSE(Completion(R"({"prompt":[[1,2],[3]]})", &r));
  EXPECT_EQ(r.prompts.size(), 2u);
  ASSERT_FALSE(Completion(R"({"prompt":["a","b"],"n":2})", &r));
  EXPECT_EQ(r.prompts.size(), 2u);
  for (const char* bad : {R"({})", R"({"prompt":5})", R"({"prompt":[]})", R"({"prompt":""})",
                          R"({"prompt":[1,-2]})", R"({"prompt":[[1],"a",{}]})"}) {
    auto e = Completion(bad);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->param, "prompt") << bad;
  }
}

TEST(RequestParse, GenerateNative) {
  Json j = Json::parse(R"({"text":"1+1=","sampling_params":{"max_new_tokens":4,
      "temperature":0,"stop":["\n"]},"stream":true})");
  ParsedRequest r;
  ASSERT_FALSE(ParseGenerateRequest(j, RequestLimits{}, &r));
  EXPECT_EQ(r.gen.max_tokens, 4);
  EXPECT_TRUE(r.stream);
  Json both = Json::parse(R"({"text":"a","input_ids":[1]})");
  auto e = ParseGenerateRequest(both, RequestLimits{}, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "text");
  Json badsp = Json::parse(R"({"text":"a","sampling_params":{"max_new_tokens":"x"}})");
  e = ParseGenerateRequest(badsp, RequestLimits{}, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "sampling_params.max_new_tokens");
}

TEST(RequestParse, OutputConstraintsFromEveryApi) {
  using grammar::ConstraintKind;
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  ParsedRequest r;
  ASSERT_FALSE(Chat("{" + m + R"(,"response_format":{"type":"json_schema","json_schema":{
      "name":"n","strict":true,"schema":{"type":"integer"}}}})",
                    &r));
  ASSERT_TRUE(r.constraint);
  EXPECT_EQ(r.constraint->kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(r.constraint->text, R"({"type":"integer"})");
  EXPECT_EQ(r.constraint_param, "response_format");
  ASSERT_FALSE(Chat("{" + m + R"(,"response_format":{"type":"json_object"}})", &r));
  EXPECT_EQ(r.constraint->kind, ConstraintKind::kJsonObject);
  ASSERT_FALSE(Chat("{" + m + R"(,"response_format":{"type":"text"}})", &r));
  EXPECT_FALSE(r.constraint);
  ASSERT_FALSE(Completion(R"({"prompt":"a","guided_choice":["x","y"]})", &r));
  EXPECT_EQ(r.constraint->kind, ConstraintKind::kChoice);
  EXPECT_EQ(r.constraint->choices, (std::vector<std::string>{"x", "y"}));
  ASSERT_FALSE(Completion(R"({"prompt":"a","guided_grammar":"root ::= \"a\""})", &r));
  EXPECT_EQ(r.constraint->kind, ConstraintKind::kEbnf);
  ASSERT_FALSE(Completion(R"({"prompt":"a","json_schema":"{\"type\":\"null\"}"})", &r));
  EXPECT_EQ(r.constraint->text, R"({"type":"null"})");
  Json g = Json::parse(R"({"text":"a","sampling_params":{"ebnf":"root ::= \"b\""}})");
  ASSERT_FALSE(ParseGenerateRequest(g, RequestLimits{}, &r));
  EXPECT_EQ(r.constraint->kind, ConstraintKind::kEbnf);
  EXPECT_EQ(r.constraint_param, "sampling_params.ebnf");
  Json top = Json::parse(R"({"text":"a","regex":"[ab]+"})");
  ASSERT_FALSE(ParseGenerateRequest(top, RequestLimits{}, &r));
  EXPECT_EQ(r.constraint->kind, ConstraintKind::kRegex);
  // Malformed: wrong types, two at once, a json_schema without its schema.
  for (const std::string& bad :
       {R"("regex":5)", R"("guided_json":[1])", R"("guided_choice":["a",1])",
        R"("regex":"a","ebnf":"root ::= "a"")", R"("response_format":{"type":"json_schema"})",
        R"("response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}})",
        R"("response_format":{"type":"xml"})"}) {
    auto e = Chat("{" + m + "," + bad + "}", &r);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->http_status, 400) << bad;
  }
}

TEST(RequestParse, NestingDepthIsCountedOutsideStringsAndStopsEarly) {
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}]})", 100), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[{{{\"[[[","b":1})", 100), 1);
  EXPECT_EQ(JsonNestingDepth("[]", 100), 1);
  EXPECT_EQ(JsonNestingDepth("", 100), 0);
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_EQ(JsonNestingDepth(deep, 10), 11);
}

TEST(RequestParse, BodiesNestedPastTheLimitAre400BeforeParsing) {
  Json j;
  const int d = 200000;
  const std::string deep = R"({"x":)" + std::string(d, '[') + std::string(d, ']') + R"(,"y":1})";
  auto e = ParseBody(deep, &j, 256);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->code, "json_too_deep");
  EXPECT_NE(e->message.find("256"), std::string::npos) << e->message;
  // At the limit it parses: 255 arrays inside the top-level object.
  const std::string ok = R"({"x":)" + std::string(255, '[') + std::string(255, ']') + "}";
  EXPECT_FALSE(ParseBody(ok, &j, 256));
  const std::string over = R"({"x":)" + std::string(256, '[') + std::string(256, ']') + "}";
  EXPECT_TRUE(ParseBody(over, &j, 256));
}

TEST(RequestParse, SeedIsRecordedOnlyWhenGiven) {
  ParsedRequest r;
  ASSERT_FALSE(Chat(std::string("{") + kMsgs + "}", &r));
  EXPECT_FALSE(r.seed_given);
  ASSERT_FALSE(Chat(std::string("{") + kMsgs + R"(,"seed":5})", &r));
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.gen.sampling.seed, 5u);
}

}  // namespace
}  // namespace mx::server
