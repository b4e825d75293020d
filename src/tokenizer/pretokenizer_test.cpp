// Pre-tokenizer units: split behaviours on a hand-worked example, ByteLevel prefix space.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mx::tok {
namespace {

std::vector<std::string> PreTok(const std::string& json, const std::string& text) {
  auto p = PreTokenizer::FromJson(nlohmann::json::parse(json), "pre_tokenizer");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  std::vector<std::string> out;
  p->Apply(text, &out);
  return out;
}

std::string SplitJson(const std::string& behavior, bool invert = false) {
  return R"({"type": "Split", "pattern": {"String": "-"}, "behavior": ")" + behavior +
         R"(", "invert": )" + (invert ? "true" : "false") + "}";
}

using V = std::vector<std::string>;

// The examples from the Hugging Face SplitDelimiterBehavior documentation.
TEST(PreTokenizer, SplitBehaviors) {
  const std::string t = "the-final--countdown";
  EXPECT_EQ(PreTok(SplitJson("Removed"), t), (V{"the", "final", "countdown"}));
  EXPECT_EQ(PreTok(SplitJson("Isolated"), t), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(PreTok(SplitJson("MergedWithPrevious"), t), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(PreTok(SplitJson("MergedWithNext"), t), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(PreTok(SplitJson("Contiguous"), t), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(PreTok(SplitJson("merged_with_previous"), t), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(PreTok(SplitJson("Removed", /*invert=*/true), t), (V{"-", "-", "-"}));
}

TEST(PreTokenizer, DigitsAndByteLevel) {
  EXPECT_EQ(PreTok(R"({"type": "Digits", "individual_digits": true})", "ab123c"),
            (V{"ab", "1", "2", "3", "c"}));
  EXPECT_EQ(PreTok(R"({"type": "Digits", "individual_digits": false})", "ab123c"),
            (V{"ab", "123", "c"}));
  // add_prefix_space + GPT-2 regex, then the byte-level map (' ' -> 'Ġ').
  EXPECT_EQ(PreTok(R"({"type": "ByteLevel", "add_prefix_space": true})", "Hello world!"),
            (V{"\xC4\xA0Hello", "\xC4\xA0world", "!"}));
  EXPECT_EQ(
      PreTok(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})", "a b\n"),
      (V{"a\xC4\xA0"
         "b\xC4\x8A"}));
}

TEST(PreTokenizer, GlmRegexOnCode) {
  const std::string glm =
      R"({"type": "Split", "behavior": "Isolated", "pattern": {"Regex": )" +
      nlohmann::json(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")
          .dump() +
      "}}";
  EXPECT_EQ(PreTok(glm, "x = 12345;  // IT'S\n\n"),
            (V{"x", " =", " ", "123", "45", ";", " ", " //", " IT", "'S", "\n\n"}));
}

}  // namespace
}  // namespace mx::tok
