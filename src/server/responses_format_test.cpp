// Responses output: stream events in order with sequence numbers, the response built from the
// same deltas, statuses, and what the store keeps for a continuation.
#include "server/responses_format.h"

#include <regex>

#include <gtest/gtest.h>

#include "server/api_output_test_util.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

std::vector<Json> Events(const std::string& sse) {
  std::vector<Json> out;
  static const std::regex re("^data: (.*)$", std::regex::multiline);
  for (auto it = std::sregex_iterator(sse.begin(), sse.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(Json::parse((*it)[1].str()));
  }
  return out;
}

TEST(ResponsesFormat, EventsAndResponseAgreeAndTheStoreKeepsTheTurn) {
  ResponseStore store({});
  ResponsesContext ctx;
  ctx.conversation = Json::array({Json{{"role", "user"}, {"content", "Q"}}});
  ResponsesOutput out("resp_1", "m", 5, ctx, &store);
  FixedGeneration g = RunFixedGeneration(out);
  const GenerationResult& r = g.result;
  const std::vector<Json> ev = Events(g.sse);
  std::vector<std::string> types;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["sequence_number"], i);
    types.push_back(ev[i]["type"]);
  }
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(types, want);
  const Json resp = out.Final(r);
  EXPECT_EQ(ev.back()["response"], resp);
  EXPECT_EQ(resp["status"], "completed");
  ASSERT_EQ(resp["output"].size(), 3u);
  EXPECT_EQ(resp["output"][0]["content"][0]["text"], "think more");
  EXPECT_EQ(resp["output"][1]["content"][0]["text"], "Hi");
  EXPECT_EQ(resp["output"][2]["arguments"], R"({"a":1})");
  EXPECT_EQ(resp["usage"]["input_tokens_details"]["cached_tokens"], 16);
  auto kept = store.Get("resp_1");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->response, resp);
  ASSERT_EQ(kept->conversation.size(), 2u);
  EXPECT_EQ(kept->conversation[1]["content"], "Hi");
  EXPECT_EQ(kept->conversation[1]["reasoning_content"], "think more");
  EXPECT_EQ(kept->conversation[1]["tool_calls"][0]["id"], "call_abc");
}

TEST(ResponsesFormat, LengthIsIncompleteAndNoStoreKeepsNothing) {
  ResponseStore store({});
  ResponsesOutput out("resp_2", "m", 5, ResponsesContext{}, nullptr);
  ChoiceDelta t;
  t.content = "x";
  t.finish_reason = "length";
  out.Delta(t);
  GenerationResult r;
  r.total = &t;
  out.Finish(r);
  const Json resp = out.Final(r);
  EXPECT_EQ(resp["status"], "incomplete");
  EXPECT_EQ(resp["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(Events(out.StreamEnd(r)).back()["type"], "response.incomplete");
  EXPECT_EQ(store.count(), 0u);
}

}  // namespace
}  // namespace mx::server
