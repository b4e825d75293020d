// Synthetic prompts: exact lengths, byte-identical shared prefixes, unique suffixes, text that
// re-tokenizes to the same ids; and the SSE parser on split, CRLF and malformed input.
#include "loadgen/prompts.h"

#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "loadgen/client.h"
#include "loadgen/sse.h"

namespace mx::loadgen {
namespace {

const tok::Tokenizer& ArithTokenizer() {
  static tok::Tokenizer* t = [] {
    auto r = tok::Tokenizer::FromFile(std::string(MX_SOURCE_DIR) +
                                      "/models/glm-moe-dsa-arith-6m/tokenizer.json");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new tok::Tokenizer(std::move(*r));
  }();
  return *t;
}

TEST(Prompts, ExactLengthsAndSharedPrefixIds) {
  PromptSpec s;
  s.num_prompts = 30;
  s.input_len = 200;
  s.output_len = 7;
  s.shared_prefix_ratio = 0.6;
  s.num_prefix_groups = 3;
  s.seed = 5;
  auto r = MakePrompts(s, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prefix_len, 120);
  ASSERT_EQ(r->prefixes.size(), 3u);
  std::set<std::vector<int32_t>> suffixes;
  for (size_t i = 0; i < r->prompts.size(); ++i) {
    const BenchPrompt& p = r->prompts[i];
    EXPECT_EQ(p.prompt_len, 200);
    EXPECT_EQ(p.ids.size(), 200u);
    EXPECT_EQ(p.output_len, 7);
    EXPECT_EQ(p.group, static_cast<int>(i % 3));
    const auto& pre = r->prefixes[static_cast<size_t>(p.group)].ids;
    EXPECT_TRUE(std::equal(pre.begin(), pre.end(), p.ids.begin()));
    suffixes.insert(std::vector<int32_t>(p.ids.begin() + 120, p.ids.end()));
  }
  EXPECT_EQ(suffixes.size(), 30u);
  // A new seed gives new suffixes (a fresh prompt set per sweep point).
  s.seed = 6;
  auto r2 = MakePrompts(s, nullptr);
  EXPECT_NE(r2->prompts[0].ids, r->prompts[0].ids);
}

TEST(Prompts, RangeRatioFollowsSglang) {
  PromptSpec s;
  s.num_prompts = 200;
  s.input_len = 100;
  s.range_ratio = 0.5;
  auto r = MakePrompts(s, nullptr);
  ASSERT_TRUE(r.ok());
  int lo = 1000, hi = 0;
  for (auto& p : r->prompts) {
    lo = std::min(lo, p.prompt_len);
    hi = std::max(hi, p.prompt_len);
  }
  EXPECT_GE(lo, 50);
  EXPECT_LE(hi, 100);
  EXPECT_LT(lo, 60);
  EXPECT_GT(hi, 90);
}

TEST(Prompts, TextRetokenizesExactlyWithIdenticalPrefixText) {
  const tok::Tokenizer& t = ArithTokenizer();
  PromptSpec s;
  s.num_prompts = 12;
  s.input_len = 300;
  s.shared_prefix_ratio = 0.5;
  s.num_prefix_groups = 2;
  s.text = true;
  auto r = MakePrompts(s, &t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text_len_mismatches, 0);
  for (const BenchPrompt& p : r->prompts) {
    EXPECT_EQ(t.Encode(p.text, false), p.ids);
    EXPECT_EQ(p.prompt_len, 300);
    const std::string& pre = r->prefixes[static_cast<size_t>(p.group)].text;
    EXPECT_EQ(p.text.compare(0, pre.size(), pre), 0);
  }
}

TEST(Prompts, ErrorsNameTheFlag) {
  PromptSpec s;
  s.shared_prefix_ratio = 1.5;
  auto r = MakePrompts(s, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--shared-prefix-ratio"), std::string::npos);
  PromptSpec t;
  t.text = true;
  EXPECT_FALSE(MakePrompts(t, nullptr).ok());
}

TEST(RequestBody, CompletionsIdsAndChatText) {
  BenchPrompt p;
  p.ids = {5, 6};
  p.text = " hi there";
  p.output_len = 9;
  ClientOptions o;
  o.model = "m";
  auto j = nlohmann::json::parse(RequestBody(o, p));
  EXPECT_EQ(j["prompt"], nlohmann::json({5, 6}));
  EXPECT_EQ(j["max_tokens"], 9);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  o.endpoint = Endpoint::kChat;
  j = nlohmann::json::parse(RequestBody(o, p));
  EXPECT_EQ(j["messages"][0]["content"], " hi there");
  EXPECT_EQ(j["max_completion_tokens"], 9);
}

TEST(Sse, SplitsLinesAcrossPiecesAndSkipsComments) {
  SseParser p;
  std::vector<std::string> got;
  for (std::string_view piece : {"data: {\"a\"", ":1}\r\n\r\n: keep-alive\n\nda", "ta:[DONE]\n"}) {
    for (auto& s : p.Feed(piece)) got.push_back(s);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "{\"a\":1}");
  EXPECT_EQ(got[1], "[DONE]");
  EXPECT_FALSE(p.has_partial_line());
}

TEST(Sse, ChunkFields) {
  auto c = ParseStreamChunk(R"({"choices":[{"index":0,"text":"ab"}]})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->text, "ab");
  c = ParseStreamChunk(R"({"choices":[{"delta":{"reasoning_content":"r","content":"c"}}]})");
  EXPECT_EQ(c->text, "rc");
  // vLLM's new name alone, and both names together (the same text): counted once.
  c = ParseStreamChunk(R"({"choices":[{"delta":{"reasoning":"r2","content":"c"}}]})");
  EXPECT_EQ(c->text, "r2c");
  c = ParseStreamChunk(
      R"({"choices":[{"delta":{"reasoning_content":"r","reasoning":"r","content":"c"}}]})");
  EXPECT_EQ(c->text, "rc");
  c = ParseStreamChunk(R"({"choices":[{"delta":{"role":"assistant"}}]})");
  EXPECT_TRUE(c->has_choices);
  EXPECT_TRUE(c->text.empty());
  c = ParseStreamChunk(R"({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,)"
                       R"("prompt_tokens_details":{"cached_tokens":8}}})");
  EXPECT_EQ(*c->prompt_tokens, 10);
  EXPECT_EQ(*c->completion_tokens, 3);
  EXPECT_EQ(*c->cached_tokens, 8);
  c = ParseStreamChunk(
      R"({"choices":[],"usage":{"prompt_tokens":10,"prompt_tokens_details":null}})");
  EXPECT_FALSE(c->cached_tokens);
  c = ParseStreamChunk(R"({"error":{"message":"boom"}})");
  EXPECT_EQ(c->error, "boom");
  c = ParseStreamChunk(R"({"error":null,"choices":[{"text":"x"}]})");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->error.empty());
  EXPECT_EQ(c->text, "x");
  EXPECT_TRUE(ParseStreamChunk("[DONE]")->done);
  EXPECT_FALSE(ParseStreamChunk("{not json"));
  EXPECT_FALSE(ParseStreamChunk("[1,2]"));
}

}  // namespace
}  // namespace mx::loadgen
