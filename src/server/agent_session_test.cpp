// What an agent session needs from the server, over the scripted FakeEngine: keep-alives on
// every streaming route while the first token is slow to come (a long prefill), thinking
// budgets under every name reaching the engine, reasoning tokens in usage, tool-call markup that
// is not a call coming back as text and counted, and clear_thinking false by default for the
// templates that take it.
#include <gtest/gtest.h>

#include <mutex>
#include <string>

#include "server/server_test_harness.h"

namespace mx::server::agent_session_test {
namespace {

using Json = nlohmann::ordered_json;

size_t Count(const std::string& body, const std::string& what, size_t end = std::string::npos) {
  size_t n = 0;
  const std::string head = body.substr(0, end);
  for (size_t pos = head.find(what); pos != std::string::npos; pos = head.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

// The first token comes 600 ms after the request; keep-alives every 20 ms fill the wait, in
// each API's own form.
TEST(AgentSession, KeepAlivesWhileTheFirstTokenIsSlow) {
  ServerOptions o;
  o.sse_keepalive = std::chrono::milliseconds(20);
  Harness h("46", o, std::chrono::milliseconds(600));
  const std::string chat = R"({"messages":[{"role":"user","content":"12+34="}],"max_tokens":1,
      "stream":true,"chat_template_kwargs":{"enable_thinking":false}})";
  auto r = h.Post("/v1/chat/completions", chat);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_GE(Count(r->body, ": keep-alive\n\n", r->body.find("data: ")), 2u) << r->body;
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);

  auto m = h.Post("/v1/messages", R"({"messages":[{"role":"user","content":"12+34="}],
      "max_tokens":1,"stream":true,"thinking":{"type":"disabled"}})");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  // One ping opens every stream; the rest are keep-alives.
  EXPECT_GE(Count(m->body, "event: ping\n", m->body.find("event: content_block_start")), 3u)
      << m->body;

  auto s = h.Post("/v1/responses", R"({"input":"12+34=","max_output_tokens":1,"stream":true,
      "reasoning":{"effort":"none"}})");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  const size_t first = s->body.find("event: response.output_item.added");
  EXPECT_GE(Count(s->body, "event: response.in_progress\n", first), 3u) << s->body;
  // Their sequence numbers still count up one by one.
  int64_t seq = -1;
  for (const std::string& d : SseData(s->body)) {
    const Json e = Json::parse(d);
    EXPECT_EQ(e["sequence_number"].get<int64_t>(), seq + 1);
    seq = e["sequence_number"].get<int64_t>();
  }
  const std::string metrics = h.client->Get("/metrics")->body;
  EXPECT_EQ(metrics.find("mxserve:sse_keepalives_total{model=\"arith\"} 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("mxserve:sse_keepalives_total{model=\"arith\"} "), std::string::npos);
}

// thinking_budget, vLLM's and sglang's names, Messages' budget_tokens and the efforts (by the
// server's budgets) reach the engine as a budget ended by </think>.
TEST(AgentSession, ThinkingBudgetsReachTheEngine) {
  ServerOptions o;
  o.effort_budgets.low = 7;
  o.effort_budgets.high = 0;  // unbounded
  Harness h("<think>a</think>46", o);
  auto tok = tok::Tokenizer::FromFile(kModelDir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const int32_t end = *tok->TokenId("</think>");
  const std::string msgs =
      R"("messages":[{"role":"user","content":"12+34="}],"max_tokens":9,"chat_template_kwargs":{"enable_thinking":true})";
  struct C {
    const char* route;
    std::string body;
    int32_t budget;
  };
  for (const C& c :
       {C{"/v1/chat/completions", "{" + msgs + R"(,"thinking_budget":3})", 3},
        C{"/v1/chat/completions", "{" + msgs + R"(,"thinking_token_budget":4})", 4},
        C{"/v1/chat/completions", "{" + msgs + R"(,"custom_params":{"thinking_budget":5}})", 5},
        C{"/v1/chat/completions", "{" + msgs + R"(,"reasoning_effort":"low"})", 7},
        C{"/v1/chat/completions", "{" + msgs + R"(,"reasoning_effort":"high"})", -1},
        C{"/v1/chat/completions", "{" + msgs + "}", -1},
        C{"/v1/messages", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":9,
            "thinking":{"type":"enabled","budget_tokens":6}})",
          6},
        C{"/v1/responses", R"({"input":"x","reasoning":{"effort":"low"}})", 7}}) {
    auto r = h.Post(c.route, c.body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    std::lock_guard<std::mutex> lock(h.shared->mu);
    const GenerationRequest& g = h.shared->submitted.back();
    EXPECT_EQ(g.thinking_budget, c.budget) << c.body;
    if (c.budget >= 0) {
      EXPECT_EQ(g.think_end_token, end) << c.body;
      EXPECT_TRUE(g.reasoning_open) << c.body;
    }
  }
}

// usage.completion_tokens_details.reasoning_tokens counts the tokens before </think>, the same
// streaming or not; Responses reports them as output_tokens_details.reasoning_tokens.
TEST(AgentSession, UsageReportsReasoningTokens) {
  Harness h("one two three</think>46");
  auto tok = tok::Tokenizer::FromFile(kModelDir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const auto want = static_cast<int64_t>(tok->Encode("one two three").size());
  const std::string req = R"({"messages":[{"role":"user","content":"12+34="}],"max_tokens":40,
      "chat_template_kwargs":{"enable_thinking":true}})";
  auto r = h.Post("/v1/chat/completions", req);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "one two three");
  EXPECT_EQ(j["usage"]["completion_tokens_details"]["reasoning_tokens"], want);
  auto s = h.Post(
      "/v1/chat/completions",
      req.substr(0, req.size() - 1) + R"(,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(s->status, 200);
  const std::vector<std::string> events = SseData(s->body);
  ASSERT_GE(events.size(), 2u);
  const Json usage = Json::parse(events[events.size() - 2])["usage"];
  EXPECT_EQ(usage["completion_tokens_details"]["reasoning_tokens"], want) << s->body;
  auto resp = h.Post("/v1/responses", R"({"input":"x","reasoning":{"effort":"high"}})");
  ASSERT_EQ(resp->status, 200) << resp->body;
  EXPECT_EQ(Json::parse(resp->body)["usage"]["output_tokens_details"]["reasoning_tokens"], want);
}

// With the tool-call constraint off (--no-tool-call-constraint), a call to a tool the request did
// not declare, and a call without <arg_value>, come back as content (never a 5xx), streaming or
// not, and are counted by reason.
TEST(AgentSession, UndeclaredAndMalformedToolCallsAreContentAndCounted) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{
      "type":"object","properties":{"city":{"type":"string"}}}}}])";
  struct C {
    const char* script;
    const char* reason;
  };
  for (const C& c :
       {C{"<tool_call>rm_rf<arg_key>path</arg_key><arg_value>/</arg_value>"
          "</tool_call>",
          "unknown_tool"},
        C{"<tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call>", "malformed"},
        C{"<tool_call>get_weather<arg_key>city", "malformed"}}) {
    ServerOptions o;
    o.tool_call_constraint = false;
    Harness h(c.script, o);
    const std::string req = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":60,
        "chat_template_kwargs":{"enable_thinking":false},)" +
                            tools;
    auto r = h.Post("/v1/chat/completions", req + "}");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const Json msg = Json::parse(r->body)["choices"][0]["message"];
    EXPECT_EQ(msg["content"], c.script);
    EXPECT_FALSE(msg.contains("tool_calls")) << r->body;
    auto s = h.Post("/v1/chat/completions", req + R"(,"stream":true})");
    ASSERT_EQ(s->status, 200);
    std::string streamed;
    for (const std::string& d : SseData(s->body)) {
      if (d == "[DONE]") continue;
      const Json e = Json::parse(d);
      EXPECT_FALSE(e["choices"][0]["delta"].contains("tool_calls"));
      streamed += e["choices"][0]["delta"].value("content", "");
    }
    EXPECT_EQ(streamed, c.script);
    const std::string metrics = h.client->Get("/metrics")->body;
    EXPECT_NE(metrics.find(std::string("mxserve:tool_call_parse_failures_total{model=\"arith\","
                                       "reason=\"") +
                           c.reason + "\"} 2\n"),
              std::string::npos)
        << metrics;
  }
}

// tool_choice auto with the constraint on (the default): once the script opens a call, the
// rest of it is the declared tools' grammar, so the same broken scripts come back as calls to a
// declared tool with arguments of the schema's types, streaming or not; text before stays text.
TEST(AgentSession, OpenedToolCallsFollowTheDeclaredToolsGrammar) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{
      "type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]},
      "days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}}}])";
  for (const char* script :
       {"Sure. <tool_call>rm_rf<arg_key>path</arg_key><arg_value>/</arg_value></tool_call>",
        "Sure. <tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call>",
        "Sure. <tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value>"
        "</tool_call>"}) {
    Harness h(script);
    // parallel_tool_calls false: the output ends with the call (the fake's script goes on).
    const std::string req = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":200,
        "parallel_tool_calls":false,"chat_template_kwargs":{"enable_thinking":false},)" +
                            tools;
    for (int seed = 1; seed <= 3; ++seed) {
      const std::string body = req + ",\"seed\":" + std::to_string(seed);
      auto r = h.Post("/v1/chat/completions", body + "}");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const Json j = Json::parse(r->body);
      const Json msg = j["choices"][0]["message"];
      EXPECT_EQ(msg["content"], "Sure. ") << r->body;
      ASSERT_TRUE(msg.contains("tool_calls")) << script << " " << r->body;
      ASSERT_EQ(msg["tool_calls"].size(), 1u) << r->body;
      const Json& fn = msg["tool_calls"][0]["function"];
      EXPECT_EQ(fn["name"], "get_weather");
      const Json args = Json::parse(fn["arguments"].get<std::string>());
      EXPECT_TRUE(args["city"] == "Paris" || args["city"] == "Oslo") << args.dump();
      if (args.contains("days")) {
        EXPECT_TRUE(args["days"].is_number_integer()) << args.dump();
      }
      auto s = h.Post("/v1/chat/completions", body + R"(,"stream":true})");
      ASSERT_EQ(s->status, 200);
      std::string streamed_args;
      for (const std::string& d : SseData(s->body)) {
        if (d == "[DONE]") continue;
        const Json e = Json::parse(d);
        const Json& delta = e["choices"][0]["delta"];
        if (delta.contains("tool_calls")) {
          streamed_args += delta["tool_calls"][0]["function"]["arguments"].get<std::string>();
        }
      }
      EXPECT_EQ(streamed_args, fn["arguments"].get<std::string>());
    }
  }
}

// GLM-4.7's template (it reads clear_thinking) keeps every turn's reasoning unless a request
// or the server says otherwise, so a session's next prompt starts with its previous one; a
// template that does not read the variable is left alone.
TEST(AgentSession, ClearThinkingIsFalseUnlessARequestOrTheServerSays) {
  const std::string glm47 = std::string(MX_SHARED_DIR) + "/chat-templates/glm-4.7.jinja";
  auto engine =
      std::make_unique<testing::FakeEngine>(std::vector<int32_t>{0}, std::vector<int32_t>{0});
  auto m = LoadServedModel("m", kModelDir, std::move(engine), glm47);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ServedModel& model = **m;
  EXPECT_TRUE(model.template_takes_clear_thinking);
  Json turn1 = Json::array({Json{{"role", "user"}, {"content", "12+34="}}});
  auto first = model.RenderChat(turn1, Json(), Json::object());
  ASSERT_TRUE(first.ok());
  Json turn2 = turn1;
  turn2.push_back(Json{{"role", "assistant"},
                       {"content", "46"},
                       {"reasoning_content", "add the tens, then the ones"}});
  turn2.push_back(Json{{"role", "user"}, {"content", "and 1+1?"}});
  auto kept = model.RenderChat(turn2, Json(), Json::object());
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->starts_with(*first)) << *kept;
  EXPECT_NE(kept->find("add the tens, then the ones"), std::string::npos);
  auto cleared = model.RenderChat(turn2, Json(), Json{{"clear_thinking", true}});
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->find("add the tens"), std::string::npos);
  EXPECT_FALSE(cleared->starts_with(*first));
  model.clear_thinking = true;  // serve --clear-thinking
  EXPECT_EQ(model.RenderChat(turn2, Json(), Json::object())->find("add the tens"),
            std::string::npos);
  EXPECT_NE(model.RenderChat(turn2, Json(), Json{{"clear_thinking", false}})->find("add the tens"),
            std::string::npos);

  auto bundled = LoadServedModel(
      "b", kModelDir,
      std::make_unique<testing::FakeEngine>(std::vector<int32_t>{0}, std::vector<int32_t>{0}));
  ASSERT_TRUE(bundled.ok());
  EXPECT_FALSE((*bundled)->template_takes_clear_thinking);
}

}  // namespace
}  // namespace mx::server::agent_session_test
