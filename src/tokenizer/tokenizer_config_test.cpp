// tokenizer_config.json parsing.
#include "tokenizer/tokenizer_config.h"

#include <gtest/gtest.h>

namespace mx::tok {
namespace {

TEST(TokenizerConfig, ParsesTokensAndTemplate) {
  auto c = TokenizerConfig::FromJson(R"({"bos_token": null, "eos_token": "<|endoftext|>",
      "pad_token": {"content": "<|endoftext|>", "lstrip": false}, "add_bos_token": false,
      "chat_template": "[gMASK]<sop>{{ messages }}"})",
                                     "tc.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->bos_token.has_value());
  EXPECT_EQ(c->eos_token, "<|endoftext|>");
  EXPECT_EQ(c->pad_token, "<|endoftext|>");
  EXPECT_EQ(c->add_bos_token, false);
  EXPECT_EQ(c->chat_template, "[gMASK]<sop>{{ messages }}");
  EXPECT_EQ(c->chat_template_source, "tc.json");
}

TEST(TokenizerConfig, NamedTemplates) {
  auto c = TokenizerConfig::FromJson(
      R"({"chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})",
      "tc.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->chat_template, "A");
  EXPECT_EQ(c->named_chat_templates.at("tool_use"), "B");
}

TEST(TokenizerConfig, ErrorsNameFileAndField) {
  auto c = TokenizerConfig::FromJson(R"({"eos_token": 5})", "dir/tokenizer_config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("dir/tokenizer_config.json: eos_token"), std::string::npos)
      << c.status().message();
  EXPECT_FALSE(TokenizerConfig::FromJson(R"({"chat_template": 3})", "x").ok());
  EXPECT_FALSE(TokenizerConfig::FromJson("{", "x").ok());
}

TEST(TokenizerConfig, LoadsTinyCheckpoint) {
  const std::string dir = std::string(MX_TEST_DATA_DIR) + "/tiny";
  auto c = TokenizerConfig::Load(dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  if (c->path.empty()) GTEST_SKIP() << "no " << dir << "/tokenizer_config.json";
  EXPECT_EQ(c->eos_token, "<|endoftext|>");
  ASSERT_TRUE(c->chat_template.has_value());
  EXPECT_EQ(c->chat_template->rfind("[gMASK]<sop>", 0), 0u);
}

TEST(TokenizerConfig, MissingDirectoryIsEmptyConfig) {
  auto c = TokenizerConfig::Load("/nonexistent-model-dir");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->path.empty());
  EXPECT_FALSE(c->chat_template.has_value());
}

}  // namespace
}  // namespace mx::tok
