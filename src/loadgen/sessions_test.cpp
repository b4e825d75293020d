// `bench sessions` against the scripted mock server over all three APIs: prompt sizes, the
// server-reported cache hits and the expected share computed from the prompts are checked
// exactly (the mock counts a word as a token and caches whole blocks of prompt + reply, so
// turn t hits floor(reused / block) * block); a failing turn ends its session only. Also the
// Messages and Responses stream events the client now parses, malformed ones included.
#include "loadgen/sessions.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "loadgen/mock_server.h"
#include "loadgen/sse.h"

namespace mx::loadgen {
namespace {

using json = nlohmann::json;

std::unique_ptr<MockServer> StartMock(const MockServerOptions& o) {
  auto s = MockServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

constexpr int kBlock = 4;

SessionSpec SmallSpec() {
  SessionSpec s;
  s.sessions = 3;
  s.turns = 4;
  s.system_len = 12;  // three whole blocks
  s.first_user_len = 7;
  s.tool_result_len = 9;
  s.output_len = 5;
  s.seed = 3;
  return s;
}

// SmallSpec's sessions over chat completions against `base_url`.
SessionsConfig SmallChatConfig(const std::string& base_url) {
  SessionsConfig c;
  c.client.base_url = base_url;
  c.client.endpoint = Endpoint::kChat;
  c.spec = SmallSpec();
  return c;
}

class SessionsApis : public ::testing::TestWithParam<Endpoint> {};

TEST_P(SessionsApis, CacheArithmeticIsExact) {
  MockServerOptions so;
  so.ttft_ms = 2;
  so.itl_ms = 1;
  so.cache_block = kBlock;
  so.reasoning_words = 2;  // 2 reasoning + 3 answer tokens per turn, all sent back
  auto server = StartMock(so);
  SessionsConfig c;
  c.client.base_url = server->base_url();
  c.client.model = "mock";
  c.client.endpoint = GetParam();
  c.spec = SmallSpec();
  int progress_calls = 0, last_turns = 0;
  c.progress = [&](int turns, int total, int, int failed, double) {
    ++progress_calls;
    last_turns = turns;
    EXPECT_EQ(total, 12);
    EXPECT_EQ(failed, 0);
  };
  auto run = RunSessions(c);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(progress_calls, 12);
  EXPECT_EQ(last_turns, 12);
  EXPECT_FALSE(run->tokenizer_units);
  ASSERT_EQ(run->turns.size(), 12u);
  EXPECT_EQ(server->requests_seen(), 13);  // the warm-up, then 3 x 4 turns
  SessionsReport r = SummarizeSessions(*run);
  EXPECT_EQ(r.completed_sessions, 3);
  EXPECT_EQ(r.failed_sessions, 0);
  ASSERT_EQ(r.per_turn.size(), 4u);

  // Turn 1: system 12 + task 7; each later turn adds the 5-token reply and a 9-word result.
  // Reused: the warmed system prompt, then the whole previous turn with its reply.
  const int64_t prompt[] = {19, 33, 47, 61};
  const int64_t reused[] = {12, 24, 38, 52};
  int64_t all_prompt = 0, all_cached = 0, all_reused = 0;
  for (int t = 0; t < 4; ++t) {
    SCOPED_TRACE(t);
    const TurnStats& ts = r.per_turn[static_cast<size_t>(t)];
    const BenchMetrics& m = ts.metrics;
    EXPECT_EQ(m.completed, 3);
    EXPECT_EQ(m.total_input_tokens, 3 * prompt[t]);
    EXPECT_EQ(m.total_output_tokens, 3 * 5);
    EXPECT_EQ(ts.prompt_units, 3 * prompt[t]);
    EXPECT_EQ(ts.reused_units, 3 * reused[t]);
    ASSERT_TRUE(m.cache_reported);
    const int64_t cached = reused[t] / kBlock * kBlock;
    EXPECT_EQ(m.total_cached_tokens, 3 * cached);
    EXPECT_DOUBLE_EQ(m.cache_hit_rate_pct, 100.0 * cached / prompt[t]);
    EXPECT_DOUBLE_EQ(ts.expected_hit_pct, 100.0 * reused[t] / prompt[t]);
    EXPECT_EQ(m.itl_ms.mean >= 0, true);
    all_prompt += 3 * prompt[t];
    all_cached += 3 * cached;
    all_reused += 3 * reused[t];
  }
  const BenchMetrics& m = r.overall.metrics;
  EXPECT_EQ(m.completed, 12);
  EXPECT_EQ(m.total_prompt_tokens, all_prompt);
  EXPECT_EQ(m.total_cached_tokens, all_cached);
  EXPECT_DOUBLE_EQ(r.overall.expected_hit_pct, 100.0 * all_reused / all_prompt);
  // Five content chunks per turn (two reasoning, three answer): four gaps each.
  for (const TurnRecord& tr : run->turns) {
    EXPECT_TRUE(tr.rec.success) << tr.rec.error_kind << " " << tr.rec.error;
    EXPECT_TRUE(tr.rec.usage_reported);
    EXPECT_EQ(tr.rec.itl_s.size(), 4u);
    EXPECT_EQ(tr.rec.generated_reasoning, " r r");
    EXPECT_EQ(tr.rec.generated_content, " a a a");
    EXPECT_EQ(tr.reply_units, 5);
  }
  // Session times in order: every turn of a session after the one before it.
  for (const SessionRecord& s : run->sessions) {
    EXPECT_TRUE(s.completed);
    EXPECT_EQ(s.turns_done, 4);
    EXPECT_LE(s.start_s, s.end_s);
  }
  EXPECT_GT(r.completion_s.mean, 0);

  const json j = SessionsJson(r);
  EXPECT_EQ(j["completed_sessions"], 3);
  EXPECT_EQ(j["per_turn"].size(), 4u);
  EXPECT_EQ(j["per_turn"][1]["turn"], 2);
  EXPECT_EQ(j["overall"]["cache_report"]["total_cached_tokens"], all_cached);
  EXPECT_EQ(j["units"], "words");
  const std::string html = SessionsHtml(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Prefix-cache hits per turn"), std::string::npos);
  EXPECT_NE(SessionsTable(r).find("sessions: 3 completed, 0 failed"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Apis, SessionsApis,
                         ::testing::Values(Endpoint::kChat, Endpoint::kMessages,
                                           Endpoint::kResponses),
                         [](const auto& info) {
                           return std::string(info.param == Endpoint::kChat       ? "chat"
                                              : info.param == Endpoint::kMessages ? "messages"
                                                                                  : "responses");
                         });

TEST(Sessions, RequestBodiesCarryTheReplyBackPerApi) {
  const std::vector<Message> conv = {
      {"user", "task", ""}, {"assistant", "answer", "why"}, {"user", "tool out", ""}};
  json chat = json::parse(SessionRequestBody(Endpoint::kChat, "m", "sys", conv, 7, true));
  EXPECT_EQ(chat["messages"].size(), 4u);
  EXPECT_EQ(chat["messages"][0]["role"], "system");
  EXPECT_EQ(chat["messages"][2]["reasoning_content"], "why");
  EXPECT_EQ(chat["messages"][2]["content"], "answer");
  EXPECT_EQ(chat["max_tokens"], 7);
  EXPECT_EQ(chat["ignore_eos"], true);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);

  json msg = json::parse(SessionRequestBody(Endpoint::kMessages, "m", "sys", conv, 7, false));
  EXPECT_EQ(msg["system"], "sys");
  EXPECT_EQ(msg["messages"].size(), 3u);
  EXPECT_EQ(msg["messages"][1]["content"][0]["type"], "thinking");
  EXPECT_EQ(msg["messages"][1]["content"][0]["thinking"], "why");
  EXPECT_EQ(msg["messages"][1]["content"][1]["text"], "answer");
  EXPECT_FALSE(msg.contains("ignore_eos"));

  json resp = json::parse(SessionRequestBody(Endpoint::kResponses, "m", "sys", conv, 7, false));
  EXPECT_EQ(resp["instructions"], "sys");
  EXPECT_EQ(resp["max_output_tokens"], 7);
  ASSERT_EQ(resp["input"].size(), 4u);
  EXPECT_EQ(resp["input"][1]["type"], "reasoning");
  EXPECT_EQ(resp["input"][1]["content"][0]["text"], "why");
  EXPECT_EQ(resp["input"][2]["content"][0]["type"], "output_text");
}

TEST(Sessions, AFailedTurnEndsOnlyItsSession) {
  MockServerOptions so;
  so.ttft_ms = 1;
  so.itl_ms = 1;
  so.fault = [](int k) { return k == 5 ? std::string("http_500") : std::string(); };
  auto server = StartMock(so);
  SessionsConfig c = SmallChatConfig(server->base_url());
  auto run = RunSessions(c);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  SessionsReport r = SummarizeSessions(*run);
  EXPECT_EQ(r.completed_sessions, 2);
  EXPECT_EQ(r.failed_sessions, 1);
  EXPECT_EQ(r.errors_by_kind.at("http_500"), 1);
  EXPECT_EQ(r.overall.metrics.failed, 1);
  // The failed session sent its failed turn and nothing after it.
  int failed_turns = 0;
  for (const SessionRecord& s : run->sessions) {
    if (!s.completed) {
      EXPECT_NE(s.error.find("http_500"), std::string::npos);
      failed_turns = s.turns_done + 1;
    }
  }
  EXPECT_EQ(run->turns.size(), static_cast<size_t>(2 * 4 + failed_turns));
}

// A reply that streams no text (llama-server on random weights drops text that is not valid
// UTF-8) fails its turn as no_output and ends the session; with accept_empty_replies the turn
// is completed, sent back as an empty assistant message, and counted. The mock scripts an empty
// answer for every session's second turn and three words for the others.
TEST(Sessions, EmptyRepliesFailOrCompleteTheTurn) {
  constexpr int kReplyWords = 3;
  std::mutex mu;
  std::vector<json> third_turn_bodies;
  MockServerOptions so;
  so.ttft_ms = 2;
  so.itl_ms = 1;
  so.cache_block = kBlock;
  so.reply = [&](const std::string& body) {
    const json j = json::parse(body);
    const size_t messages = j["messages"].size();  // system + task, then 2 per turn
    if (messages == 6) {
      std::lock_guard<std::mutex> l(mu);
      third_turn_bodies.push_back(j);
    }
    return messages == 4 ? std::string() : std::string("w w w");
  };
  auto server = StartMock(so);
  SessionsConfig c = SmallChatConfig(server->base_url());

  // Default: the empty second turn is a no_output failure that ends every session.
  auto failing = RunSessions(c);
  ASSERT_TRUE(failing.ok()) << failing.status().ToString();
  SessionsReport f = SummarizeSessions(*failing);
  EXPECT_EQ(f.completed_sessions, 0);
  EXPECT_EQ(f.failed_sessions, 3);
  EXPECT_EQ(f.errors_by_kind.at("no_output"), 3);
  EXPECT_EQ(failing->turns.size(), 6u);
  EXPECT_EQ(f.overall.empty_replies, 0);
  EXPECT_TRUE(third_turn_bodies.empty());

  // A fresh server (an empty prefix cache) for the run that accepts them.
  auto server2 = StartMock(so);
  c.client.base_url = server2->base_url();
  c.spec.accept_empty_replies = true;
  auto run = RunSessions(c);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  SessionsReport r = SummarizeSessions(*run);
  EXPECT_EQ(r.completed_sessions, 3);
  EXPECT_EQ(r.failed_sessions, 0);
  EXPECT_TRUE(r.errors_by_kind.empty());
  ASSERT_EQ(run->turns.size(), 12u);
  EXPECT_EQ(r.overall.empty_replies, 3);
  ASSERT_EQ(r.per_turn.size(), 4u);

  // Turn 1: system 12 + task 7; turn 2 adds the 3-word reply and a 9-word result; turn 3 adds
  // the empty reply (nothing) and a result; turn 4 a reply and a result.
  const int64_t prompt[] = {19, 31, 40, 52};
  const int64_t reused[] = {12, 22, 31, 43};
  const int64_t output[] = {kReplyWords, 0, kReplyWords, kReplyWords};
  for (int t = 0; t < 4; ++t) {
    SCOPED_TRACE(t);
    const TurnStats& ts = r.per_turn[static_cast<size_t>(t)];
    EXPECT_EQ(ts.metrics.completed, 3);
    EXPECT_EQ(ts.empty_replies, t == 1 ? 3 : 0);
    EXPECT_EQ(ts.metrics.total_input_tokens, 3 * prompt[t]);
    EXPECT_EQ(ts.metrics.total_output_tokens, 3 * output[t]);
    EXPECT_EQ(ts.reused_units, 3 * reused[t]);
    EXPECT_EQ(ts.metrics.total_cached_tokens, 3 * (reused[t] / kBlock * kBlock));
  }
  // An empty turn's TTFT is its E2E and it has no gaps; the mean TTFT "with content" leaves
  // it out.
  double content_ttft = 0;
  int content_turns = 0;
  for (const TurnRecord& tr : run->turns) {
    EXPECT_TRUE(tr.rec.success) << tr.rec.error_kind;
    EXPECT_EQ(tr.empty_reply, tr.turn == 1);
    if (tr.empty_reply) {
      EXPECT_EQ(tr.rec.ttft_s, tr.rec.latency_s);
      EXPECT_TRUE(tr.rec.itl_s.empty());
      EXPECT_EQ(tr.rec.generated_content, "");
      EXPECT_EQ(tr.reply_units, 0);
    } else {
      EXPECT_EQ(tr.rec.generated_content, "w w w");
      content_ttft += tr.rec.ttft_s;
      ++content_turns;
    }
  }
  ASSERT_EQ(content_turns, 9);
  constexpr double kMsTolerance = 1e-9;
  EXPECT_NEAR(r.overall.mean_ttft_with_content_ms, 1e3 * content_ttft / content_turns,
              kMsTolerance);
  EXPECT_EQ(r.per_turn[1].mean_ttft_with_content_ms, 0.0);
  // The third turn sent the empty reply back as an empty assistant message.
  ASSERT_EQ(third_turn_bodies.size(), 3u);
  for (const json& b : third_turn_bodies) {
    EXPECT_EQ(b["messages"][4], json({{"role", "assistant"}, {"content", ""}}));
  }
  r.spec = c.spec;  // the caller's part
  const json j = SessionsJson(r);
  EXPECT_EQ(j["accept_empty_replies"], true);
  EXPECT_EQ(j["empty_replies"], 3);
  EXPECT_EQ(j["per_turn"][1]["empty_replies"], 3);
  EXPECT_EQ(j["per_turn"][0]["empty_replies"], 0);
  EXPECT_NE(SessionsTable(r).find("empty replies: 3"), std::string::npos);
  EXPECT_NE(SessionsHtml(r).find("3 turns got an empty reply"), std::string::npos);
}

TEST(Sessions, NoServerIsAnError) {
  SessionsConfig c = SmallChatConfig("http://127.0.0.1:1");
  c.client.connect_timeout_s = 2;
  auto run = RunSessions(c);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("warm-up"), std::string::npos);
}

TEST(Sessions, LimitsNameTheFlag) {
  auto bad = [](auto edit, const char* flag) {
    SessionSpec s = SmallSpec();
    edit(s);
    Status st = ValidateSpec(s);
    EXPECT_FALSE(st.ok()) << flag;
    EXPECT_NE(st.message().find(flag), std::string::npos) << st.message();
  };
  bad([](SessionSpec& s) { s.sessions = 0; }, "--sessions");
  bad([](SessionSpec& s) { s.sessions = kMaxSessions + 1; }, "--sessions");
  bad([](SessionSpec& s) { s.turns = kMaxTurns + 1; }, "--turns");
  bad([](SessionSpec& s) { s.tool_result_len = kMaxMessageLen + 1; }, "--tool-result-len");
  bad([](SessionSpec& s) { s.output_len = 0; }, "--output-len");
  bad([](SessionSpec& s) { s.range_ratio = 0; }, "--range-ratio");
  bad([](SessionSpec& s) { s.think_time_s = -1; }, "--think-time-ms");
  EXPECT_TRUE(ValidateSpec(SmallSpec()).ok());
}

TEST(Sse, MessagesEvents) {
  auto c = ParseStreamChunk(
      R"({"type":"message_start","message":{"usage":{"input_tokens":90,)"
      R"("cache_read_input_tokens":10,"cache_creation_input_tokens":0,"output_tokens":0}}})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->prompt_tokens, 100);
  EXPECT_EQ(c->cached_tokens, 10);
  c = ParseStreamChunk(
      R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}})");
  EXPECT_EQ(c->text, "hm");
  EXPECT_EQ(c->reasoning, "hm");
  c = ParseStreamChunk(
      R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}})");
  EXPECT_EQ(c->text, "ok");
  EXPECT_EQ(c->reasoning, "");
  c = ParseStreamChunk(R"({"type":"message_delta","usage":{"output_tokens":7}})");
  EXPECT_EQ(c->completion_tokens, 7);
  EXPECT_FALSE(c->prompt_tokens);
  EXPECT_TRUE(ParseStreamChunk(R"({"type":"message_stop"})")->done);
  EXPECT_EQ(ParseStreamChunk(R"({"type":"error","error":{"type":"x","message":"over"}})")->error,
            "over");
  // Wrong types are ignored, never thrown.
  c = ParseStreamChunk(R"({"type":"content_block_delta","delta":{"type":"text_delta","text":5}})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->text, "");
  c = ParseStreamChunk(R"({"type":"message_start","message":{"usage":{"input_tokens":"x"}}})");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->prompt_tokens);
  EXPECT_TRUE(ParseStreamChunk(R"({"type":"ping"})"));
  EXPECT_FALSE(ParseStreamChunk(R"({"type":"message_stop")"));
}

TEST(Sse, ResponsesEvents) {
  auto c = ParseStreamChunk(R"({"type":"response.reasoning_text.delta","delta":"th"})");
  EXPECT_EQ(c->reasoning, "th");
  EXPECT_EQ(c->text, "th");
  c = ParseStreamChunk(R"({"type":"response.output_text.delta","delta":"ans"})");
  EXPECT_EQ(c->text, "ans");
  EXPECT_FALSE(c->done);
  c = ParseStreamChunk(R"({"type":"response.completed","response":{"usage":{"input_tokens":50,)"
                       R"("input_tokens_details":{"cached_tokens":32},"output_tokens":4}}})");
  EXPECT_TRUE(c->done);
  EXPECT_EQ(c->prompt_tokens, 50);
  EXPECT_EQ(c->cached_tokens, 32);
  EXPECT_EQ(c->completion_tokens, 4);
  EXPECT_TRUE(ParseStreamChunk(R"({"type":"response.incomplete","response":{}})")->done);
  c = ParseStreamChunk(R"({"type":"response.failed","response":{"error":{"message":"oom"}}})");
  EXPECT_FALSE(c->done);
  EXPECT_EQ(c->error, "oom");
  EXPECT_EQ(ParseStreamChunk(R"({"type":"error","message":"bad"})")->error, "bad");
  EXPECT_EQ(ParseStreamChunk(R"({"type":"error"})")->error, "error event");
  c = ParseStreamChunk(R"({"type":"response.completed","response":"nope"})");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->done);
  EXPECT_FALSE(c->prompt_tokens);
}

TEST(Sse, ToolCallPiecesInEveryShape) {
  auto c = ParseStreamChunk(
      R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_9","type":"function",)"
      R"("function":{"name":"get_order","arguments":"{\"order_id\""}}]}}]})");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->tool_calls.size(), 1u);
  EXPECT_EQ(c->tool_calls[0].index, 1);
  EXPECT_EQ(c->tool_calls[0].id, "call_9");
  EXPECT_EQ(c->tool_calls[0].name, "get_order");
  EXPECT_EQ(c->tool_calls[0].arguments, "{\"order_id\"");
  c = ParseStreamChunk(
      R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use",)"
      R"("id":"toolu_1","name":"list_orders","input":{}}})");
  ASSERT_EQ(c->tool_calls.size(), 1u);
  EXPECT_EQ(c->tool_calls[0].index, 2);
  EXPECT_EQ(c->tool_calls[0].name, "list_orders");
  c = ParseStreamChunk(
      R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",)"
      R"("partial_json":"{}"}})");
  ASSERT_EQ(c->tool_calls.size(), 1u);
  EXPECT_EQ(c->tool_calls[0].arguments, "{}");
  c = ParseStreamChunk(
      R"({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call",)"
      R"("call_id":"c1","name":"get_order","arguments":""}})");
  ASSERT_EQ(c->tool_calls.size(), 1u);
  EXPECT_EQ(c->tool_calls[0].id, "c1");
  // Malformed pieces are skipped, never thrown.
  c = ParseStreamChunk(R"({"choices":[{"delta":{"tool_calls":[5,{"index":"x"}]}}]})");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->tool_calls.size(), 1u);
  EXPECT_EQ(c->tool_calls[0].index, 0);
  c = ParseStreamChunk(R"({"type":"content_block_start","content_block":"tool_use"})");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->tool_calls.empty());
}

}  // namespace
}  // namespace mx::loadgen
