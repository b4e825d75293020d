// The HTTP server on a loopback port over a scripted FakeEngine and the bundled model's
// tokenizer and chat template: routes, stream vs non-stream agreement, usage, errors,
// auth, overload, a failed engine, disconnect aborts, 512 concurrent streams, drain on
// shutdown, the web page and /get_server_info.
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstring>
#include <functional>
#include <new>
#include <set>
#include <thread>
#include <utility>

#include "engine/engine.h"
#include "grammar/schema_validator_test_util.h"
#include "server/fake_engine_test_util.h"
#include "server/server_test_harness.h"
#include "server/webui.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;
using testing::FakeEngine;

// Debian's cpp-httplib is compiled with OpenSSL / zlib / brotli support; a header compiled
// without the same macros declares smaller classes than the library constructs (Client was
// 8 bytes allocated, 9 written: heap corruption that only -O0 test bodies made crash). Each
// object is built in a buffer whose bytes past sizeof carry a canary the library must not touch.
template <typename T, typename... Args>
void ExpectConstructedWithinSizeof(const char* name, Args&&... args) {
  alignas(64) unsigned char buf[sizeof(T) + 256];
  std::memset(buf, 0xA5, sizeof(buf));
  T* obj = new (buf) T(std::forward<Args>(args)...);
  obj->~T();
  for (size_t i = sizeof(T); i < sizeof(buf); ++i) {
    ASSERT_EQ(buf[i], 0xA5) << name << ": the library wrote byte " << i << " past sizeof "
                            << sizeof(T) << " (header and library built with other macros)";
  }
}

TEST(HttplibAbi, HeaderAndLibraryAgreeOnClassSizes) {
  ExpectConstructedWithinSizeof<httplib::Client>("Client", "127.0.0.1", 1);
  ExpectConstructedWithinSizeof<httplib::Server>("Server");
  ExpectConstructedWithinSizeof<httplib::Request>("Request");
  ExpectConstructedWithinSizeof<httplib::Response>("Response");
}

struct Streamed {
  std::string content, reasoning, finish;
  Json tool_calls = Json::array();
  Json usage;
  bool done = false;
};

Streamed ParseChatStream(const std::string& body) {
  Streamed s;
  for (const std::string& d : SseData(body)) {
    if (d == "[DONE]") {
      s.done = true;
      continue;
    }
    Json j = Json::parse(d);
    if (j.contains("usage") && !j["usage"].is_null()) s.usage = j["usage"];
    for (const auto& c : j["choices"]) {
      const Json& delta = c["delta"];
      if (delta.contains("content")) s.content += delta["content"].get<std::string>();
      if (delta.contains("reasoning_content")) {
        s.reasoning += delta["reasoning_content"].get<std::string>();
      }
      if (delta.contains("tool_calls")) {
        for (const auto& t : delta["tool_calls"]) s.tool_calls.push_back(t);
      }
      if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
    }
  }
  return s;
}

TEST(Server, ChatStreamAndNonStreamAgree) {
  Harness h("<think>add</think>46");
  const std::string req = R"({"model":"arith","messages":[{"role":"user","content":"12+34="}],
      "temperature":0,"max_tokens":20)";
  auto r = h.Post("/v1/chat/completions", req + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "arith");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "46");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "add");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const Json& u = j["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());

  auto s = h.Post("/v1/chat/completions",
                  req + R"(,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  EXPECT_NE(s->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  Streamed st = ParseChatStream(s->body);
  EXPECT_TRUE(st.done);
  EXPECT_EQ(st.content, "46");
  EXPECT_EQ(st.reasoning, "add");
  EXPECT_EQ(st.finish, "stop");
  EXPECT_EQ(st.usage["completion_tokens"], u["completion_tokens"]);
  EXPECT_EQ(st.usage["prompt_tokens"], u["prompt_tokens"]);
  // The same prompt again: the (fake) radix cache reports cached tokens.
  EXPECT_GT(st.usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST(Server, ToolCallsStreamAndNonStream) {
  Harness h(
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
      "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>");
  const std::string req =
      R"({"messages":[{"role":"user","content":"weather?"}],"chat_template_kwargs":{"enable_thinking":false},
      "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])";
  auto r = h.Post("/v1/chat/completions", req + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  const Json& msg = j["choices"][0]["message"];
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << r->body;
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris","days":2})");
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  Streamed st = ParseChatStream(h.Post("/v1/chat/completions", req + R"(,"stream":true})")->body);
  ASSERT_EQ(st.tool_calls.size(), 1u);
  EXPECT_EQ(st.tool_calls[0]["function"]["arguments"],
            msg["tool_calls"][0]["function"]["arguments"]);
  EXPECT_EQ(st.finish, "tool_calls");
}

// Two tools whose arguments cover raw strings (enum, maxLength), JSON values (enum, array,
// bounded numbers, boolean), required and optional parameters.
const char* kForcedTools = R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string","enum":["Paris","Oslo"]},
                  "days":{"type":"integer","minimum":1,"maximum":7},
                  "units":{"enum":["c","f"]},"detail":{"type":"boolean"},
                  "note":{"type":"string","maxLength":8}},
    "required":["city","days"]}}},
  {"type":"function","function":{"name":"add","parameters":{"type":"object",
    "properties":{"a":{"type":"integer"},"b":{"type":"number","minimum":0,"maximum":10},
                  "tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2}},
    "required":["a","b"]}}}])";

// Every call names a tool and its arguments validate against that tool's parameters.
void ExpectValidCalls(const Json& calls, const std::string& only, const std::string& body,
                      const char* tools_text = kForcedTools) {
  const Json tools = Json::parse(tools_text);
  ASSERT_TRUE(calls.is_array() && !calls.empty()) << body;
  for (const Json& c : calls) {
    const std::string name = c["function"]["name"];
    if (!only.empty()) {
      EXPECT_EQ(name, only) << body;
    }
    const Json* params = nullptr;
    for (const Json& t : tools) {
      if (t["function"]["name"] == name) params = &t["function"]["parameters"];
    }
    ASSERT_NE(params, nullptr) << name;
    const Json args = Json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_FALSE(args.is_discarded()) << body;
    EXPECT_EQ(grammar::testing::SchemaValidator(*params).Check(args), "") << args.dump();
  }
}

// tool_choice "required" and a named function force a call: the fake engine writes whatever
// the grammar allows (its script fits nowhere), so every answer must be a parseable call to a
// listed (or the named) tool with valid arguments, streaming giving the same calls.
TEST(Server, ForcedToolCallsAreValidStreamingOrNot) {
  Harness h("I will not call a tool.");
  const std::string base =
      R"({"messages":[{"role":"user","content":"weather?"}],"max_tokens":400,
      "chat_template_kwargs":{"enable_thinking":false},"tools":)" +
      std::string(kForcedTools);
  std::set<std::string> names;
  for (int seed = 1; seed <= 12; ++seed) {
    for (const std::string only : {"", "add", "get_weather"}) {
      const std::string choice =
          only.empty() ? R"("required")"
                       : R"({"type":"function","function":{"name":")" + only + R"("}})";
      const std::string req =
          base + ",\"seed\":" + std::to_string(seed) + ",\"tool_choice\":" + choice;
      auto r = h.Post("/v1/chat/completions", req + "}");
      ASSERT_EQ(r->status, 200) << r->body;
      const Json j = Json::parse(r->body);
      const Json& msg = j["choices"][0]["message"];
      EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << r->body;
      ExpectValidCalls(msg["tool_calls"], only, r->body);
      if (only.empty()) {
        for (const Json& c : msg["tool_calls"]) names.insert(c["function"]["name"]);
      } else {
        EXPECT_EQ(msg["tool_calls"].size(), 1u) << r->body;
      }
      Streamed st =
          ParseChatStream(h.Post("/v1/chat/completions", req + R"(,"stream":true})")->body);
      ASSERT_EQ(st.tool_calls.size(), msg["tool_calls"].size()) << r->body;
      for (size_t k = 0; k < st.tool_calls.size(); ++k) {
        EXPECT_EQ(st.tool_calls[k]["function"]["name"], msg["tool_calls"][k]["function"]["name"]);
        EXPECT_EQ(st.tool_calls[k]["function"]["arguments"],
                  msg["tool_calls"][k]["function"]["arguments"]);
      }
      EXPECT_EQ(st.finish, "tool_calls");
    }
  }
  EXPECT_EQ(names.size(), 2u);  // "required" picks among the tools
}

// "none": a script that writes a call gets no tool call back; bad tool_choice values are 400s.
TEST(Server, ToolChoiceNoneAndBadValues) {
  Harness h("<tool_call>add<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>");
  const std::string base =
      R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},
      "tools":)" +
      std::string(kForcedTools);
  auto r = h.Post("/v1/chat/completions", base + R"(,"tool_choice":"none"})");
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls")) << r->body;
  EXPECT_NE(j["choices"][0]["finish_reason"], "tool_calls");
  const std::pair<std::string, std::string> bad[] = {
      {base + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})", "nope"},
      {base + R"(,"tool_choice":{"type":"function"}})", "tool_choice"},
      {base + R"(,"tool_choice":"required","guided_regex":"a"})", "give one"},
      {base + R"(,"tool_choice":"required","parallel_tool_calls":1})", "parallel_tool_calls"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", "needs tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[
        {"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"x":{"type":"object","patternProperties":{}}}}}}]})",
       "patternProperties"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[
        {"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"x":{"type":"string","contentSchema":{}}}}}}]})",
       "contentSchema"},
  };
  for (const auto& [body, want] : bad) {
    auto e = h.Post("/v1/chat/completions", body);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 400) << body << ": " << e->body;
    EXPECT_NE(e->body.find(want), std::string::npos) << body << ": " << e->body;
  }
}

TEST(Server, CompletionsTextIdsBatchAndLogprobs) {
  Harness h("1+1=2");
  auto r = h.Post("/v1/completions", R"({"prompt":"12+34=","max_tokens":30,"echo":true})");
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "12+34=1+1=2");
  auto b = h.Post("/v1/completions", R"({"prompt":[[5,6,7],[8,9]],"n":2,"max_tokens":2,
      "logprobs":2})");
  ASSERT_EQ(b->status, 200) << b->body;
  Json bj = Json::parse(b->body);
  ASSERT_EQ(bj["choices"].size(), 4u);
  EXPECT_EQ(bj["choices"][3]["finish_reason"], "length");
  EXPECT_EQ(bj["choices"][0]["logprobs"]["tokens"].size(), 2u);
  EXPECT_EQ(bj["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(bj["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(bj["usage"]["completion_tokens"], 8);
  auto s = h.Post("/v1/completions", R"({"prompt":"x","max_tokens":30,"stream":true})");
  std::string text;
  for (const auto& d : SseData(s->body)) {
    if (d != "[DONE]") text += Json::parse(d)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "1+1=2");
}

TEST(Server, NativeRoutes) {
  Harness h("46");
  auto g = h.Post("/generate", R"({"text":"12+34=","sampling_params":{"max_new_tokens":8,
      "temperature":0}})");
  ASSERT_EQ(g->status, 200) << g->body;
  Json j = Json::parse(g->body);
  EXPECT_EQ(j["text"], "46");
  EXPECT_EQ(j["meta_info"]["finish_reason"]["type"], "stop");
  EXPECT_TRUE(j["meta_info"].contains("cached_tokens"));
  auto t = h.Post("/tokenize", R"({"prompt":"12+34="})");
  ASSERT_EQ(t->status, 200);
  Json tj = Json::parse(t->body);
  auto d = h.Post("/detokenize", Json{{"tokens", tj["tokens"]}}.dump());
  EXPECT_EQ(Json::parse(d->body)["prompt"], "12+34=");
  EXPECT_EQ(h.client->Get("/health")->status, 200);
  EXPECT_EQ(h.client->Get("/health_generate")->status, 200);
  Json models = Json::parse(h.client->Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "arith");
  EXPECT_EQ(h.Post("/flush_cache", "")->status, 200);
  std::string metrics = h.client->Get("/metrics")->body;
  for (const char* name : {"mxserve:num_requests_running{model=\"arith\"}",
                           "mxserve:prompt_tokens_total",
                           "mxserve:generation_tokens_total",
                           "mxserve:cached_prompt_tokens_total",
                           "mxserve:time_to_first_token_seconds_bucket",
                           "mxserve:inter_token_latency_seconds_sum",
                           "mxserve:e2e_request_latency_seconds_count",
                           "mxserve:kv_pages_total",
                           "mxserve:cache_hit_rate",
                           "mxserve:spec_accept_length",
                           "mxserve:num_requests_waiting",
                           "mxserve:spec_accept_length{model=\"arith\"} 2.2",
                           "mxserve:spec_draft_tokens_total{model=\"arith\"} 20",
                           "mxserve:spec_accepted_tokens_total{model=\"arith\"} 12",
                           "mxserve:spec_verify_steps_total{model=\"arith\"} 10",
                           "mxserve:spec_accept_rate{model=\"arith\",position=\"0\"} 0.8",
                           "mxserve:spec_accept_rate{model=\"arith\",position=\"1\"} 0.4",
                           "mxserve:spec_num_steps{model=\"arith\"} 3",
                           "mxserve:spec_auto_estimate_tokens_per_second{model=\"arith\"} 150",
                           "mxserve:spec_auto_estimate_off_tokens_per_second{model=\"arith\"} 100",
                           "mxserve:spec_steps_chosen_total{model=\"arith\",steps=\"0\"} 7",
                           "mxserve:spec_steps_chosen_total{model=\"arith\",steps=\"3\"} 5",
                           "mxserve:forward_seconds_total{model=\"arith\"} 1.5",
                           "mxserve:spec_mtp_seconds_total{model=\"arith\"} 0.25",
                           "mxserve:spec_mtp_rows_total{model=\"arith\"} 40"}) {
    EXPECT_NE(metrics.find(name), std::string::npos) << name;
  }
}

TEST(Server, ErrorClasses) {
  ServerOptions o;
  o.http.max_body_bytes = 4096;
  Harness h("46", o);
  auto check = [&](const std::string& path, const std::string& body, int status,
                   const std::string& param) {
    auto r = h.Post(path, body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    Json j = Json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    ASSERT_TRUE(j.contains("error")) << r->body;
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  };
  check("/v1/chat/completions", "{oops", 400, "");
  check("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"top_k":"a"})", 400,
        "top_k");
  check("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":600})",
        400, "max_tokens");
  check("/v1/completions", R"({"prompt":[1,2,99999]})", 400, "prompt");
  check("/v1/completions", Json{{"prompt", std::string(3000, '7')}}.dump(), 400, "prompt");
  check("/v1/chat/completions", R"({"model":"nope","messages":[{"role":"user","content":"x"}]})",
        404, "model");
  check("/v1/completions", Json{{"prompt", std::string(5000, 'x')}}.dump(), 413, "");
  check("/v1/nothing", "{}", 404, "");
  auto nf = h.Post("/v1/chat/completions", R"({"model":"nope","messages":[{"role":"user",
      "content":"x"}]})");
  EXPECT_NE(nf->body.find("arith"), std::string::npos);  // lists the served models
}

TEST(Server, AuthAndLoading) {
  ServerOptions o;
  o.api_key = "sekret";
  Harness h("46", o, std::chrono::milliseconds(1), 100000, /*ready=*/false);
  EXPECT_EQ(h.client->Get("/health")->status, 503);
  EXPECT_EQ(
      h.Post("/v1/completions", R"({"prompt":"1"})", {{"Authorization", "Bearer sekret"}})->status,
      503);
  ASSERT_TRUE(h.server->SetReady().ok());
  EXPECT_EQ(h.client->Get("/health")->status, 200);
  EXPECT_EQ(h.Post("/v1/completions", R"({"prompt":"1"})")->status, 401);
  EXPECT_EQ(h.Post("/v1/completions", R"({"prompt":"1"})", {{"Authorization", "Bearer x"}})->status,
            401);
  EXPECT_EQ(
      h.Post("/v1/completions", R"({"prompt":"1"})", {{"Authorization", "Bearer sekret"}})->status,
      200);
}

// An engine that fails (its model runner broke) turns /health and /health_generate to 503
// with the reason; generation is refused with 503, and the other routes keep answering.
TEST(Server, FailedEngineTurnsHealthTo503WithTheReason) {
  Harness h("46");
  ASSERT_EQ(h.client->Get("/health")->status, 200);
  {
    std::lock_guard<std::mutex> lock(h.shared->mu);
    h.shared->health = Status(StatusCode::kUnavailable, "engine failed: tp rank 2 died");
  }
  for (const char* route : {"/health", "/health_generate"}) {
    auto r = h.client->Get(route);
    ASSERT_TRUE(r) << route;
    EXPECT_EQ(r->status, 503) << route;
    EXPECT_EQ(r->body, "arith: engine failed: tp rank 2 died\n") << route;
  }
  auto g = h.Post("/v1/completions", R"({"prompt":"1","max_tokens":2})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 503) << g->body;
  EXPECT_NE(g->body.find("tp rank 2 died"), std::string::npos) << g->body;
  auto models = h.client->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "arith");
  auto metrics = h.client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("mxserve:http_responses_total{code=\"503\"}"), std::string::npos);
}

TEST(Server, QueueFullIs429WithRetryAfter) {
  Harness h("1234567890", {}, std::chrono::milliseconds(200), /*max_active=*/1);
  std::thread slow([&] { h.Post("/v1/completions", R"({"prompt":"1","max_tokens":5})"); });
  // Wait (not sleep a fixed time) until the slow request holds the only slot: on a loaded
  // host the first request may take a while to reach the engine.
  ASSERT_TRUE(h.WaitUntilRunning());
  httplib::Client c2("127.0.0.1", h.server->port());
  auto r = c2.Post("/v1/completions", R"({"prompt":"2","max_tokens":5})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  slow.join();
}

// Opens a raw connection, sends a request, waits for `started` (a streamed response's first
// bytes; a non-streamed one sends nothing before its result) and hangs up.
void StreamAndHangUp(int port, const std::string& body, const std::function<bool()>& started) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  WaitFor(started, kWaitTimeout, "the response's first bytes");
  close(fd);
}

TEST(Server, DisconnectAbortsWithinASoonStep) {
  Harness h("1234567890", {}, std::chrono::milliseconds(5));
  for (bool stream : {true, false}) {
    const int64_t before = h.shared->aborted;
    const int64_t finished_before = h.shared->finished;
    StreamAndHangUp(
        h.server->port(),
        Json{{"prompt", "1"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", stream}}.dump(),
        [&] {
          std::lock_guard<std::mutex> lock(h.shared->mu);
          return h.shared->generated > 0 && h.shared->active > 0;
        });
    // The abort must come before the request could finish (400 steps): whichever of the two
    // the fake engine sees first decides, not a clock.
    auto ended = [&] {
      std::lock_guard<std::mutex> lock(h.shared->mu);
      return h.shared->aborted != before || h.shared->finished != finished_before;
    };
    ASSERT_TRUE(WaitFor(ended, kWaitTimeout, "the request's abort or end"));
    EXPECT_EQ(h.shared->aborted, before + 1) << "stream=" << stream;
    EXPECT_EQ(h.shared->finished, finished_before) << "the request ran to its end";
    std::string metrics = h.client->Get("/metrics")->body;
    EXPECT_NE(metrics.find("mxserve:num_requests_running{model=\"arith\"} 0"), std::string::npos);
  }
}

TEST(Server, FiveHundredTwelveConcurrentStreams) {
  Harness h("1+1=2", {}, std::chrono::milliseconds(2));
  constexpr int kStreams = 512;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", h.server->port());
      c.set_read_timeout(60);
      auto r = c.Post(
          "/v1/chat/completions",
          Json{{"messages", Json::array({Json{{"role", "user"}, {"content", std::to_string(i)}}})},
               {"stream", true}}
              .dump(),
          "application/json");
      if (!r || r->status != 200) return;
      Streamed s = ParseChatStream(r->body);
      if (s.done && s.reasoning + s.content == "1+1=2") ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kStreams);
}

// Posts a streamed 10-token completion from a thread and client of its own; *body gets the
// response body, or "status N ..." / "error ..." when there is none to check.
std::thread StreamCompletion(Harness& h, std::string* body, bool keep_alive) {
  return std::thread([&h, body, keep_alive] {
    httplib::Client c("127.0.0.1", h.server->port());
    c.set_keep_alive(keep_alive);
    c.set_read_timeout(30);
    auto r = c.Post("/v1/completions", R"({"prompt":"1","max_tokens":10,"ignore_eos":true,
        "stream":true})",
                    "application/json");
    if (!r) {
      *body = "error " + httplib::to_string(r.error());
    } else {
      *body = r->status == 200 ? r->body : "status " + std::to_string(r->status) + " " + r->body;
    }
  });
}

TEST(Server, ShutdownDrainsRunningStreams) {
  ServerOptions o;
  o.shutdown_timeout = std::chrono::milliseconds(5000);
  auto h = std::make_unique<Harness>("1234567890", o, std::chrono::milliseconds(20));
  // Serving (the worker pool is up) before the stream starts.
  ASSERT_EQ(h->client->Get("/health")->status, 200);
  std::string body;
  std::thread t = StreamCompletion(*h, &body, /*keep_alive=*/false);
  ASSERT_TRUE(h->WaitUntilRunning());
  h->server->Shutdown();
  t.join();
  auto data = SseData(body);
  ASSERT_FALSE(data.empty()) << body;
  EXPECT_EQ(data.back(), "[DONE]");
  EXPECT_NE(body.find("\"finish_reason\":\"length\""), std::string::npos) << body;
  // New connections are refused once draining has begun.
  httplib::Client c("127.0.0.1", h->server->port());
  EXPECT_FALSE(c.Get("/health"));
}

// An idle keep-alive connection does not hold shutdown for its keep-alive timeout (5 s), and a
// stream running at shutdown still ends with [DONE]: Run returns soon after that stream.
TEST(Server, ShutdownEndsIdleKeepAliveConnectionsAtOnce) {
  ServerOptions o;
  o.shutdown_timeout = std::chrono::milliseconds(10000);
  // Longer than the test's own timeout: if shutdown waited for the idle connection, Run would
  // not return and the test would fail, with no clock in the test.
  o.http.idle_timeout = std::chrono::hours(1);
  auto h = std::make_unique<Harness>("1234567890", o, std::chrono::milliseconds(20));
  ASSERT_EQ(h->client->Get("/health")->status, 200);
  std::string body;
  std::thread t = StreamCompletion(*h, &body, /*keep_alive=*/true);
  ASSERT_TRUE(h->WaitUntilRunning());
  httplib::Client idle("127.0.0.1", h->server->port());
  idle.set_keep_alive(true);
  ASSERT_EQ(idle.Get("/v1/models")->status, 200);  // its connection stays open, idle
  h->server->Shutdown();
  h->thread.join();  // Run has returned: every connection is closed
  t.join();
  auto data = SseData(body);
  ASSERT_FALSE(data.empty()) << body;
  EXPECT_EQ(data.back(), "[DONE]");
}

TEST(Server, WebPageIsEmbeddedAndServed) {
  Harness h("46");
  ASSERT_GE(WebUiAssets().size(), 3u);
  EXPECT_EQ(WebUiAssets().front().path, "/");
  for (const WebAsset& a : WebUiAssets()) {
    auto r = h.client->Get(std::string(a.path).c_str());
    ASSERT_TRUE(r) << a.path;
    EXPECT_EQ(r->status, 200) << a.path;
    EXPECT_EQ(r->get_header_value("Content-Type"), a.content_type) << a.path;
    EXPECT_EQ(r->body, a.body) << a.path;
    EXPECT_NE(r->get_header_value("Content-Security-Policy").find("default-src 'self'"),
              std::string::npos);
  }
  const std::string page = h.client->Get("/")->body;
  EXPECT_NE(page.find("<title>mxserve</title>"), std::string::npos);
  EXPECT_NE(page.find("src=\"/webui/app.js\""), std::string::npos);
  EXPECT_NE(page.find("href=\"/webui/style.css\""), std::string::npos);
  // Nothing from elsewhere: no absolute URLs in what the page loads.
  for (const WebAsset& a : WebUiAssets()) {
    EXPECT_EQ(a.body.find("src=\"http"), std::string_view::npos) << a.path;
    EXPECT_EQ(a.body.find("href=\"http"), std::string_view::npos) << a.path;
  }
  auto missing = h.client->Get("/webui/nope.js");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["error"]["code"], "not_found");
}

TEST(Server, NoWebUiServesNoPage) {
  ServerOptions o;
  o.webui = false;
  Harness h("46", o);
  auto r = h.client->Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "not_found");
  EXPECT_EQ(h.client->Get("/webui/app.js")->status, 404);
  EXPECT_EQ(h.client->Get("/get_server_info")->status, 200);  // the API is unchanged
}

TEST(Server, WebPageIsPublicUnderApiKeyButItsDataIsNot) {
  ServerOptions o;
  o.api_key = "sekret";
  Harness h("46", o);
  EXPECT_EQ(h.client->Get("/")->status, 200);
  EXPECT_EQ(h.client->Get("/webui/app.js")->status, 200);
  EXPECT_EQ(h.client->Get("/get_server_info")->status, 401);
  EXPECT_EQ(h.client->Get("/webui/nope.js")->status, 401);  // only the page's own files are public
  auto ok = h.client->Get("/get_server_info", {{"Authorization", "Bearer sekret"}});
  ASSERT_EQ(ok->status, 200);
  EXPECT_EQ(Json::parse(ok->body)["auth"], true);
}

// A model's thinking default is its chat template's: GLM-5.2's opens <think> unless a request
// says otherwise, the bundled model's (trained on non-thinking turns) closes it. The web page
// starts its thinking box from /get_server_info's thinking_default.
TEST(Server, ThinkingDefaultComesFromTheChatTemplate) {
  const std::string glm52 = std::string(MX_SOURCE_DIR) + "/tests/data/tiny-glm52";
  for (const auto& [dir, want] : {std::pair{kModelDir, false}, std::pair{glm52, true}}) {
    auto engine = std::make_unique<FakeEngine>(std::vector<int32_t>{0}, std::vector<int32_t>{0},
                                               std::chrono::milliseconds(1), 1, 64);
    auto m = LoadServedModel("m", dir, std::move(engine));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->thinking_default, want) << dir;
  }
  Harness h("46");
  Json j = Json::parse(h.client->Get("/get_server_info")->body);
  EXPECT_EQ(j["models"][0]["chat_template"], true);
  EXPECT_EQ(j["models"][0]["thinking_default"], false);
}

TEST(Server, ServerInfoHasTheStatusFields) {
  Harness h("<think>add</think>46");
  auto before = Json::parse(h.client->Get("/get_server_info")->body);
  EXPECT_EQ(before["models"][0]["latency_seconds"]["ttft"]["count"], 0);
  EXPECT_TRUE(before["models"][0]["latency_seconds"]["ttft"]["p50"].is_null());
  ASSERT_EQ(
      h.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"1+1="}]})")->status,
      200);
  auto r = h.client->Get("/get_server_info");
  ASSERT_EQ(r->status, 200);
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["server"], "mxserve");
  EXPECT_EQ(j["ready"], true);
  EXPECT_EQ(j["auth"], false);
  EXPECT_EQ(j["default_model"], "arith");
  EXPECT_GT(j["uptime_seconds"].get<double>(), 0);
  ASSERT_EQ(j["models"].size(), 1u);
  const Json& m = j["models"][0];
  EXPECT_EQ(m["name"], "arith");
  EXPECT_EQ(m["architecture"], "GlmMoeDsaForCausalLM");
  EXPECT_EQ(m["parameters"]["total"], 6033056);
  EXPECT_EQ(m["weight_formats"]["bf16"], 182);
  EXPECT_EQ(m["kv_cache_dtype"], "bf16");
  EXPECT_EQ(m["tuned_configs"], "none");
  EXPECT_EQ(m["context_window"], 512);
  EXPECT_EQ(m["requests"]["running"], 0);
  EXPECT_EQ(m["requests"]["queued"], 0);
  EXPECT_EQ(m["requests"]["accepted"], 1);
  EXPECT_EQ(m["requests"]["finished"], 1);
  EXPECT_EQ(m["kv_cache"]["pages_total"], 100);
  EXPECT_TRUE(m["kv_cache"]["pages_used"].is_number_integer());
  EXPECT_TRUE(m["radix_cache"]["hit_rate"].is_number());
  EXPECT_TRUE(m["speculative"]["accept_length"].is_number());
  EXPECT_EQ(m["speculative"]["auto"], true);  // what the web page's drafts tile shows
  EXPECT_EQ(m["speculative"]["num_steps"], 3);
  EXPECT_EQ(m["speculative"]["estimate_tokens_per_second"], 150.0);
  EXPECT_EQ(m["speculative"]["estimate_off_tokens_per_second"], 100.0);
  EXPECT_EQ(m["speculative"]["steps_histogram"], Json::array({7, 0, 0, 5}));
  // The web page's totals line, from the server's one table of metrics (metrics.h).
  std::vector<std::string> keys;
  for (const Json& t : j["totals"]) {
    keys.push_back(t["key"]);
    const std::string path = t["path"];
    const size_t slash = path.find('/');
    EXPECT_TRUE(m[path.substr(0, slash)][path.substr(slash + 1)].is_number_integer()) << path;
  }
  EXPECT_EQ(keys,
            (std::vector<std::string>{"accepted", "finished", "aborted", "client_disconnects",
                                      "prompt_total", "generation_total", "cached_prompt_total"}));
  const int64_t generated = m["tokens"]["generation_total"];
  EXPECT_GT(generated, 0);
  EXPECT_GT(m["tokens"]["prompt_total"].get<int64_t>(), 0);
  for (const char* h : {"ttft", "itl", "e2e"}) {
    const Json& p = m["latency_seconds"][h];
    EXPECT_GT(p["count"].get<int64_t>(), 0) << h;
    EXPECT_LE(p["p50"].get<double>(), p["p90"].get<double>()) << h;
    EXPECT_LE(p["p90"].get<double>(), p["p99"].get<double>()) << h;
  }
  EXPECT_EQ(m["latency_seconds"]["ttft"]["count"], 1);
  EXPECT_EQ(m["latency_seconds"]["itl"]["count"].get<int64_t>(), generated - 1);
}

}  // namespace
}  // namespace mx::server

namespace mx::server {
namespace {

TEST(Server, ASecondServerOnABusyPortFailsToBind) {
  Harness h("hello");
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = h.server->port();
  Server second(o);
  const Status st = second.Bind();
  ASSERT_FALSE(st.ok()) << "bound port " << o.port << " that another server listens on";
  EXPECT_NE(st.message().find(std::to_string(o.port)), std::string::npos) << st.ToString();
  EXPECT_EQ(h.client->Get("/health")->status, 200);  // the first one still serves
}

}  // namespace
}  // namespace mx::server

namespace mx::server {
namespace {

// A chat request with `field` added is a 400 whose body contains `want`.
template <typename H>
void ExpectChat400(H& h, const std::string& field, const std::string& want) {
  auto e = h.Post("/v1/chat/completions",
                  R"({"model":"arith","messages":[{"role":"user","content":"hi"}],)" + field + "}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400) << field << ": " << e->body;
  EXPECT_NE(e->body.find(want), std::string::npos) << field << ": " << e->body;
}

// Structured output end to end on the bundled model: the answer follows the schema, streaming
// and not; sglang and vLLM fields; bad constraints are 400s that name the problem.
TEST(Server, StructuredOutputOnTheBundledModel) {
  EngineOptions eo;
  eo.model.model_dir = kModelDir;
  eo.threads = 1;
  eo.page_size = 4;
  eo.max_total_tokens = 4096;
  auto engine = CreateEngine(eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  Harness h(std::move(*engine));
  const std::string schema =
      R"({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]})";
  const std::string req =
      R"({"model":"arith","messages":[{"role":"user","content":"What is 12 + 30?"}],
      "temperature":0,"max_tokens":60,"chat_template_kwargs":{"enable_thinking":false},
      "response_format":{"type":"json_schema","json_schema":{"name":"a","strict":true,"schema":)" +
      schema + "}}";
  auto r = h.Post("/v1/chat/completions", req + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string content = Json::parse(r->body)["choices"][0]["message"]["content"];
  const Json answer = Json::parse(content, nullptr, false);
  ASSERT_TRUE(answer.is_object() && answer["answer"].is_number_integer()) << content;
  auto s = h.Post("/v1/chat/completions", req + R"(,"stream":true})");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  EXPECT_EQ(ParseChatStream(s->body).content, content);

  // sglang: /generate with sampling_params.regex, and json_schema as a top-level field.
  auto g = h.Post("/generate",
                  R"({"text":"1 + 2 =","sampling_params":{"temperature":0,"max_new_tokens":20,
                      "regex":"(yes|no), [0-9]{2}"}})");
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, 200) << g->body;
  const std::string text = Json::parse(g->body)["text"];
  EXPECT_TRUE(text.starts_with("yes, ") || text.starts_with("no, ")) << text;
  EXPECT_EQ(text.size(), text[0] == 'y' ? 7u : 6u) << text;
  auto gj = h.Post("/generate", R"({"text":"1 + 2 =","json_schema":"{\"type\":\"boolean\"}",
                                   "sampling_params":{"temperature":1,"max_new_tokens":20}})");
  ASSERT_TRUE(gj);
  ASSERT_EQ(gj->status, 200) << gj->body;
  const std::string b = Json::parse(gj->body)["text"];
  EXPECT_TRUE(b == "true" || b == "false") << b;

  // vLLM: guided_choice on completions, with n = 3.
  auto c = h.Post("/v1/completions", R"({"prompt":"Pick:","max_tokens":10,"n":3,"seed":4,
                                         "guided_choice":["red","green","blue"]})");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 200) << c->body;
  const Json cj = Json::parse(c->body);  // named: a range-for over a temporary's member dangles
  for (const Json& ch : cj["choices"]) {
    const std::string t = ch["text"];
    EXPECT_TRUE(t == "red" || t == "green" || t == "blue") << t;
  }

  // Bad constraints: 400 naming the field and the problem.
  const std::pair<std::string, std::string> bad[] = {
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","patternProperties":{}}}})",
       "patternProperties"},
      {R"("guided_regex":"(a")", "regex"},
      {R"("guided_grammar":"root ::= undefined_rule")", "undefined_rule"},
      {R"("regex":"a","guided_json":{"type":"integer"})", "give one"},
      {R"("guided_choice":[])", "guided_choice"},
  };
  for (const auto& [field, want] : bad) {
    ExpectChat400(h, field, want);
  }
}

// Grammar limits from ServerOptions (the --grammar-max-* flags): a constraint over one is a
// 400 that names it, and the server goes on serving.
TEST(Server, GrammarLimitsAreFourHundredsAndTheServerKeepsServing) {
  ServerOptions o;
  o.grammars.limits.max_source_bytes = 400;
  o.grammars.limits.max_depth = 3;
  o.grammars.limits.max_repeat = 50;
  Harness h("{\"a\": 1}", o);
  std::string wide = R"({"type":"object","properties":{)";
  for (int i = 0; i < 40; ++i) {
    wide += std::string(i ? "," : "") + "\"p" + std::to_string(i) + R"(":{"type":"integer"})";
  }
  wide += "}}";
  std::string deep = R"({"type":"integer"})";
  for (int i = 0; i < 5; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  const std::pair<std::string, std::string> over[] = {
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":)" + wide + "}}",
       "over the limit 400"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":)" + deep + "}}",
       "deeper than 3 (limit)"},
      {R"("guided_regex":"a{1,5000}")", "50"},
  };
  for (const auto& [field, want] : over) {
    ExpectChat400(h, field, want);
    auto ok = h.Post("/v1/chat/completions",
                     R"({"model":"arith","messages":[{"role":"user","content":"hi"}],)"
                     R"("response_format":{"type":"json_schema","json_schema":{"schema":)"
                     R"({"type":"object","properties":{"a":{"type":"integer"}}}}}})");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
  }
}

// The bundled model under tool_choice: whatever it would write, the answer is a call to the
// right tool with valid arguments (bounded ones, so every call ends within max_tokens), greedy
// and sampled, streaming giving the same calls.
TEST(Server, ForcedToolCallsOnTheBundledModel) {
  EngineOptions eo;
  eo.model.model_dir = kModelDir;
  eo.threads = 1;
  eo.page_size = 4;
  eo.max_total_tokens = 8192;
  auto engine = CreateEngine(eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  Harness h(std::move(*engine));
  static const char* kTools = R"([
    {"type":"function","function":{"name":"add","parameters":{"type":"object",
      "properties":{"a":{"type":"integer","minimum":-1000,"maximum":1000},
                    "b":{"type":"integer","minimum":-1000,"maximum":1000}},
      "required":["a","b"]}}},
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string","enum":["Paris","Oslo"]},
                    "days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}}}])";
  const std::string base =
      R"({"model":"arith","messages":[{"role":"user","content":"What is 12 + 30?"}],
      "max_tokens":200,"chat_template_kwargs":{"enable_thinking":false},"tools":)" +
      std::string(kTools);
  for (const std::string only : {"", "add", "get_weather"}) {
    for (const std::string sampling : {R"("temperature":0)", R"("temperature":1,"seed":5)"}) {
      const std::string choice =
          only.empty() ? R"("required")"
                       : R"({"type":"function","function":{"name":")" + only + R"("}})";
      // One call: a greedy model could otherwise chain calls up to max_tokens.
      const std::string req =
          base + "," + sampling + ",\"parallel_tool_calls\":false,\"tool_choice\":" + choice;
      auto r = h.Post("/v1/chat/completions", req + "}");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const Json j = Json::parse(r->body);
      EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << r->body;
      ExpectValidCalls(j["choices"][0]["message"]["tool_calls"], only, r->body, kTools);
      Streamed st =
          ParseChatStream(h.Post("/v1/chat/completions", req + R"(,"stream":true})")->body);
      EXPECT_EQ(st.tool_calls.size(), j["choices"][0]["message"]["tool_calls"].size());
      for (size_t k = 0; k < st.tool_calls.size(); ++k) {
        EXPECT_EQ(st.tool_calls[k]["function"]["arguments"],
                  j["choices"][0]["message"]["tool_calls"][k]["function"]["arguments"]);
      }
    }
  }
}
}  // namespace
}  // namespace mx::server
