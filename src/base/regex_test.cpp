// mx::Regex (PCRE2): the anchored matches and capture groups used outside the tokenizer.
#include "base/regex.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

TEST(Regex, FullMatchIsAnchoredAtBothEnds) {
  auto re = Regex::Compile(R"(model\.layers\.(\d+)\.(k|v)_scale)");
  ASSERT_TRUE(re.ok()) << re.status().ToString();
  std::vector<std::string_view> g;
  EXPECT_TRUE(re->FullMatch("model.layers.12.k_scale", &g));
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], "12");
  EXPECT_EQ(g[1], "k");
  EXPECT_FALSE(re->FullMatch("model.layers.12.k_scale.x"));
  EXPECT_FALSE(re->FullMatch("xmodel.layers.12.k_scale"));
  EXPECT_FALSE(re->FullMatch(""));
}

TEST(Regex, UnsetGroupIsEmptyAndCaselessFlagWorks) {
  auto re = Regex::Compile(R"((?i)([0-9]+)(k)?(b))");
  ASSERT_TRUE(re.ok());
  std::vector<std::string_view> g;
  ASSERT_TRUE(re->FullMatch("42B", &g));
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], "42");
  EXPECT_TRUE(g[1].empty());
  EXPECT_EQ(g[2], "B");
  ASSERT_TRUE(re->FullMatch("7kb", &g));
  EXPECT_EQ(g[1], "k");
}

TEST(Regex, MatchPrefixIsPythonReMatch) {
  auto re = Regex::Compile(R"(model\.layers\.[0-3]\.)");
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(re->MatchPrefix("model.layers.2.mlp"));
  EXPECT_FALSE(re->MatchPrefix("x.model.layers.2.mlp"));
  EXPECT_FALSE(re->MatchPrefix("model.layers.7.mlp"));
  EXPECT_TRUE(re->Search("x.model.layers.2.mlp"));
}

TEST(Regex, InvalidUtf8SubjectIsNoMatchAndBadPatternAnError) {
  auto re = Regex::Compile(R"(.*)");
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(re->FullMatch("abc"));
  EXPECT_FALSE(re->FullMatch("a\xff\xfe"));
  EXPECT_FALSE(re->MatchPrefix("\xc3"));
  auto bad = Regex::Compile("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(unclosed"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace mx
