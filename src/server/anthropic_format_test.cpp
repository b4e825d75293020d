// Anthropic output: the event sequence of a stream, and the message built from the same deltas.
#include "server/anthropic_format.h"

#include <regex>

#include <gtest/gtest.h>

#include "server/api_output_test_util.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

std::vector<std::string> EventNames(const std::string& sse) {
  std::vector<std::string> out;
  static const std::regex re("^event: (\\S+)$", std::regex::multiline);
  for (auto it = std::sregex_iterator(sse.begin(), sse.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

TEST(AnthropicFormat, StreamEventsAndMessageAgree) {
  AnthropicOutput out("msg_1", "arith", 20);
  FixedGeneration g = RunFixedGeneration(out);
  const std::string& sse = g.sse;
  const GenerationResult& r = g.result;
  const std::vector<std::string> want = {"message_start",       "ping",
                                         "content_block_start", "content_block_delta",
                                         "content_block_delta", "content_block_stop",
                                         "content_block_start", "content_block_delta",
                                         "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_stop",
                                         "message_delta",       "message_stop"};
  EXPECT_EQ(EventNames(sse), want) << sse;
  EXPECT_NE(sse.find(R"("delta":{"type":"thinking_delta","thinking":" more"})"), std::string::npos);
  EXPECT_NE(sse.find(R"("delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"})"),
            std::string::npos);
  const Json m = out.Final(r);
  EXPECT_EQ(m["id"], "msg_1");
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_EQ(m["content"].size(), 3u) << m.dump();
  EXPECT_EQ(m["content"][0],
            (Json{{"type", "thinking"}, {"thinking", "think more"}, {"signature", ""}}));
  EXPECT_EQ(m["content"][1], (Json{{"type", "text"}, {"text", "Hi"}}));
  EXPECT_EQ(m["content"][2]["id"], "toolu_abc");
  EXPECT_EQ(m["content"][2]["input"], (Json{{"a", 1}}));
  EXPECT_EQ(m["usage"], (Json{{"input_tokens", 4},
                              {"cache_creation_input_tokens", 0},
                              {"cache_read_input_tokens", 16},
                              {"output_tokens", 7}}));
}

TEST(AnthropicFormat, StopReasons) {
  struct Case {
    const char* finish;
    const char* matched;
    const char* reason;
  };
  for (const Case& c : {Case{"stop", "", "end_turn"}, Case{"stop", "##", "stop_sequence"},
                        Case{"length", "", "max_tokens"}, Case{"tool_calls", "", "tool_use"}}) {
    AnthropicOutput out("msg_1", "m", 1);
    ChoiceDelta t;
    t.finish_reason = c.finish;
    t.matched_stop = c.matched;
    GenerationResult r;
    r.total = &t;
    out.Finish(r);
    const Json m = out.Final(r);
    EXPECT_EQ(m["stop_reason"], c.reason);
    EXPECT_EQ(m["stop_sequence"], *c.matched ? Json(c.matched) : Json());
    EXPECT_EQ(m["content"], Json::array());
  }
}

TEST(AnthropicFormat, AnErrorEndsTheStreamWithAnErrorEvent) {
  AnthropicOutput out("msg_1", "m", 1);
  ChoiceDelta t;
  GenerationResult r;
  r.total = &t;
  r.error = FromStatus(Status(StatusCode::kInternal, "boom"));
  out.Finish(r);
  const std::string sse = out.StreamEnd(r);
  EXPECT_EQ(EventNames(sse), std::vector<std::string>{"error"});
  EXPECT_NE(sse.find(R"("type":"api_error","message":"boom")"), std::string::npos) << sse;
}

}  // namespace
}  // namespace mx::server
