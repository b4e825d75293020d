// Reasoning and tool-call parsing, and the per-choice pipeline: streamed pieces, split at every
// byte, give the same result as the whole text at once.
#include <gtest/gtest.h>

#include <string>

#include "engine/output_text.h"
#include "server/choice_output.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

ReasoningParser::Out SplitAll(std::string_view text, bool open, size_t piece) {
  ReasoningParser p(open);
  ReasoningParser::Out all;
  for (size_t i = 0; i < text.size(); i += piece) {
    auto o = p.Push(text.substr(i, piece));
    all.reasoning += o.reasoning;
    all.content += o.content;
  }
  auto f = p.Finish();
  all.reasoning += f.reasoning;
  all.content += f.content;
  return all;
}

TEST(ReasoningParser, SplitsThinkAtEveryPieceSize) {
  const std::string text = "<think>12+34: add tens</think>The answer is 46.";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    auto o = SplitAll(text, false, piece);
    EXPECT_EQ(o.reasoning, "12+34: add tens") << piece;
    EXPECT_EQ(o.content, "The answer is 46.") << piece;
  }
}

TEST(ReasoningParser, PromptOpenedThinking) {
  EXPECT_TRUE(PromptOpensReasoning("<|assistant|><think>"));
  EXPECT_FALSE(PromptOpensReasoning("<|assistant|></think>"));
  EXPECT_FALSE(PromptOpensReasoning("<|user|>hi"));
  for (size_t piece = 1; piece < 8; ++piece) {
    auto o = SplitAll("hmm</think>46", true, piece);
    EXPECT_EQ(o.reasoning, "hmm");
    EXPECT_EQ(o.content, "46");
    auto u = SplitAll("still thinking <", true, piece);  // never closed: all reasoning
    EXPECT_EQ(u.reasoning, "still thinking <");
    EXPECT_EQ(u.content, "");
  }
  auto plain = SplitAll("<thin", false, 2);  // a prefix of <think> that never completes
  EXPECT_EQ(plain.content, "<thin");
}

Json WeatherTools() {
  return Json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{
      "type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},
      "zip":{"type":"string"}}}}}])");
}

TEST(ToolCallParser, GlmFormatAtEveryPieceSize) {
  const std::string text =
      "Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
      "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>zip</arg_key>"
      "<arg_value>75001</arg_value>\n</tool_call>\n<tool_call>get_weather<arg_key>city</arg_key>"
      "<arg_value>Oslo</arg_value></tool_call>\n";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    ToolCallParser p(WeatherTools());
    std::string content;
    std::vector<ParsedToolCall> calls;
    for (size_t i = 0; i < text.size(); i += piece) {
      auto o = p.Push(std::string_view(text).substr(i, piece));
      content += o.content;
      calls.insert(calls.end(), o.calls.begin(), o.calls.end());
    }
    auto f = p.Finish();
    content += f.content;
    calls.insert(calls.end(), f.calls.begin(), f.calls.end());
    EXPECT_EQ(content, "Let me check.\n") << piece;
    ASSERT_EQ(calls.size(), 2u) << piece;
    EXPECT_EQ(calls[0].name, "get_weather");
    // days is an integer by schema; zip stays a string although it looks like a number.
    EXPECT_EQ(calls[0].arguments, R"({"city":"Paris","days":3,"zip":"75001"})");
    EXPECT_EQ(calls[1].arguments, R"({"city":"Oslo"})");
  }
}

TEST(ToolCallParser, UnterminatedCallIsContentAndZeroArgCallsWork) {
  ToolCallParser p{Json()};
  auto o = p.Push("<tool_call>ping</tool_call><tool_call>half<arg_key>a");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "ping");
  EXPECT_EQ(o.calls[0].arguments, "{}");
  auto f = p.Finish();
  EXPECT_EQ(f.content, "<tool_call>half<arg_key>a");
}

class ChoiceOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = tok::Tokenizer::FromFile(std::string(MX_SOURCE_DIR) +
                                      "/models/glm-moe-dsa-arith-6m/tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = new tok::Tokenizer(std::move(*t));
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static tok::Tokenizer* tokenizer_;

  // Feeds `ids` in chunks of `per_chunk` tokens; the last chunk finishes with `finish`. With
  // `o.stop`, the engine's own output text decides where the output ends (as the scheduler
  // does), unless `engine_stops` is false (the engine did not stop there, e.g. min_tokens). The
  // chunks carry the text as the engine decodes it (engine/output_text.h): once, with the stop
  // token that ends the request undecoded.
  ChoiceDelta Run(const ChoiceOptions& o, const std::vector<int32_t>& ids, size_t per_chunk,
                  FinishReason finish, std::optional<int32_t> stop_token = std::nullopt,
                  bool engine_stops = true) {
    ChoiceOutput out(*tokenizer_, o);
    OutputText text(*tokenizer_, o.stop);
    ChoiceDelta sum;
    GenerationChunk c;
    for (size_t i = 0; i < ids.size() && !out.finished(); ++i) {
      c.tokens.push_back(ids[i]);
      const bool last = i + 1 == ids.size();
      if (last && finish == FinishReason::kStop && stop_token == ids[i]) {
        c.text.emplace_back();
        c.finish = finish;
        c.matched_stop_token = stop_token;
      } else {
        OutputText::Piece p = text.Push(ids[i]);
        c.text.push_back(std::move(p.text));
        if (p.stop && engine_stops) {
          c.finish = FinishReason::kStop;
          c.matched_stop = p.stop->stop;
          c.stop_trim_bytes = p.stop->trim_bytes;
        } else if (last) {
          c.finish = finish;
          c.matched_stop_token = stop_token;
        }
      }
      if (c.finish != FinishReason::kNone && c.matched_stop.empty()) c.text_tail = text.Finish();
      if (c.finish != FinishReason::kNone || c.tokens.size() == per_chunk) {
        sum.Append(out.Push(c));
        c = GenerationChunk();
      }
    }
    EXPECT_TRUE(out.finished());
    EXPECT_EQ(sum.content, out.total().content);
    return sum;
  }
};
tok::Tokenizer* ChoiceOutputTest::tokenizer_ = nullptr;

TEST_F(ChoiceOutputTest, ReasoningToolsAndEosSameForEveryChunking) {
  const std::string text =
      "<think>need weather</think>Checking.<tool_call>get_weather<arg_key>city</arg_key>"
      "<arg_value>Paris</arg_value></tool_call>";
  std::vector<int32_t> ids = tokenizer_->Encode(text);
  const int32_t eos = *tokenizer_->TokenId("<|endoftext|>");
  ids.push_back(eos);
  ChoiceOptions o;
  o.split_reasoning = true;
  o.parse_tool_calls = true;
  o.tools = WeatherTools();
  for (size_t per = 1; per <= ids.size(); ++per) {
    ChoiceDelta d = Run(o, ids, per, FinishReason::kStop, eos);
    EXPECT_EQ(d.reasoning, "need weather") << per;
    EXPECT_EQ(d.content, "Checking.") << per;
    ASSERT_EQ(d.tool_calls.size(), 1u) << per;
    EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(d.finish_reason, "tool_calls");
    EXPECT_EQ(d.token_ids.size(), ids.size());
  }
}

TEST_F(ChoiceOutputTest, StopStringCutsTextAndFinishes) {
  std::vector<int32_t> ids = tokenizer_->Encode("12+34=46\n\nQ: 1+1=2");
  ChoiceOptions o;
  o.stop = {"\n\n"};
  for (size_t per = 1; per <= 3; ++per) {
    ChoiceDelta d = Run(o, ids, per, FinishReason::kLength);
    EXPECT_EQ(d.content, "12+34=46") << per;
    EXPECT_EQ(d.finish_reason, "stop");
    EXPECT_EQ(d.matched_stop, "\n\n");
  }
}

// The engine decides stops: text that contains a stop string the engine did not stop at (it
// matched before min_tokens) is shown whole, and the choice ends where the engine ended it.
TEST_F(ChoiceOutputTest, StopStringTheEngineDidNotReportIsShown) {
  const std::string text = "12+34=46\n\nQ: 1+1=2";
  std::vector<int32_t> ids = tokenizer_->Encode(text);
  ChoiceOptions o;
  o.stop = {"\n\n"};
  for (size_t per = 1; per <= 3; ++per) {
    ChoiceDelta d = Run(o, ids, per, FinishReason::kLength, std::nullopt, /*engine_stops=*/false);
    EXPECT_EQ(d.content, text) << per;
    EXPECT_EQ(d.finish_reason, "length");
    EXPECT_EQ(d.matched_stop, "");
  }
}

// The engine's trim counts the bytes of skipped special tokens too (its matcher decodes every
// token): a stop string right after one cuts exactly the stop string.
TEST_F(ChoiceOutputTest, StopTrimCountsSkippedSpecialTokens) {
  std::vector<int32_t> ids = tokenizer_->Encode("ab<|user|>cd<|user|>ef");
  ChoiceOptions o;
  o.stop = {"<|user|>ef"};
  for (size_t per = 1; per <= 3; ++per) {
    ChoiceDelta d = Run(o, ids, per, FinishReason::kLength);
    EXPECT_EQ(d.content, "abcd") << per;
    EXPECT_EQ(d.matched_stop, "<|user|>ef");
  }
  o.stop = {"d<|user|>e"};
  EXPECT_EQ(Run(o, ids, 2, FinishReason::kLength).content, "abc");
}

TEST_F(ChoiceOutputTest, SpecialTokensSkippedButMarkersKept) {
  std::vector<int32_t> ids = tokenizer_->Encode("a<|user|>b<think>c");
  ChoiceOptions o;  // no reasoning split: the marker shows as text
  ChoiceDelta d = Run(o, ids, 1, FinishReason::kLength);
  EXPECT_EQ(d.content, "ab<think>c");
  o.skip_special_tokens = false;
  EXPECT_EQ(Run(o, ids, 1, FinishReason::kLength).content, "a<|user|>b<think>c");
}

TEST_F(ChoiceOutputTest, ParallelToolCallsOffEndsTheOutputAfterTheFirstCall) {
  const std::string call =
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>";
  const std::vector<int32_t> ids = tokenizer_->Encode("Checking." + call + call + "more");
  ChoiceOptions o;
  o.parse_tool_calls = true;
  o.tools = WeatherTools();
  o.max_tool_calls = 1;
  for (FinishReason how : {FinishReason::kAbort, FinishReason::kLength, FinishReason::kStop}) {
    for (size_t per = 1; per <= ids.size(); per += 7) {
      ChoiceDelta d = Run(o, ids, per, how);
      EXPECT_EQ(d.content, "Checking.") << per;
      ASSERT_EQ(d.tool_calls.size(), 1u) << per;
      EXPECT_EQ(d.finish_reason, "tool_calls") << per;
    }
  }
  o.max_tool_calls = 0;
  EXPECT_EQ(Run(o, ids, 1, FinishReason::kStop).tool_calls.size(), 2u);
}

TEST_F(ChoiceOutputTest, ReasoningTokensAreCounted) {
  const int32_t end = *tokenizer_->TokenId("</think>");
  const int32_t start = *tokenizer_->TokenId("<think>");
  const int32_t call = *tokenizer_->TokenId("<tool_call>");
  const std::vector<int32_t> plan = tokenizer_->Encode("plan it");
  const std::vector<int32_t> answer = tokenizer_->Encode("ok then");
  ChoiceOptions o;
  o.split_reasoning = true;
  o.think_start_token = start;
  o.think_end_token = end;
  o.tool_call_token = call;
  auto count = [&](bool open, std::vector<int32_t> ids) {
    o.reasoning_starts_open = open;
    ChoiceOutput out(*tokenizer_, o);
    GenerationChunk c;
    OutputText text(*tokenizer_, {});
    for (int32_t id : ids) c.text.push_back(text.Push(id).text);
    c.text_tail = text.Finish();
    c.tokens = std::move(ids);
    c.finish = FinishReason::kLength;
    out.Push(c);
    return out.reasoning_tokens();
  };
  std::vector<int32_t> ids = plan;
  ids.push_back(end);
  ids.insert(ids.end(), answer.begin(), answer.end());
  EXPECT_EQ(count(true, ids), static_cast<int32_t>(plan.size()));
  EXPECT_EQ(count(false, ids), 0);  // no reasoning opened
  ids.insert(ids.begin(), start);   // opened by the output's first token (not counted)
  EXPECT_EQ(count(false, ids), static_cast<int32_t>(plan.size()));
  std::vector<int32_t> with_call = plan;  // a tool call ends the reasoning too
  with_call.push_back(call);
  with_call.insert(with_call.end(), answer.begin(), answer.end());
  EXPECT_EQ(count(true, with_call), static_cast<int32_t>(plan.size()));
  EXPECT_EQ(count(true, plan), static_cast<int32_t>(plan.size()));  // never closed
}

}  // namespace
}  // namespace mx::server
