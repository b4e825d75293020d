// generation_config.json: EOS ids as an integer or a list, merged with config.json's; an
// absent file is no error; malformed ones name the file or the field.
#include "io/generation_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mx::generation_config_test {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

// A fresh directory holding generation_config.json with `text` (no file when text is empty).
std::string DirWith(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("mx_genconfig_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (!text.empty()) std::ofstream(dir / "generation_config.json") << text;
  return dir.string();
}

TEST(GenerationConfig, TinyCheckpointEosIds) {
  auto g = LoadGenerationConfig(kTiny + "/generation_config.json");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->present);
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{300, 307, 309}));
}

TEST(GenerationConfig, EosIdsMergeConfigAndGenerationConfig) {
  ModelConfig c;
  c.eos_token_ids = {309, 5};
  auto ids = LoadEosTokenIds(DirWith("merge", R"({"eos_token_id": [300, 309, 2]})"), c);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 5, 300, 309}));  // sorted, once each
  auto single = LoadEosTokenIds(DirWith("single", R"({"eos_token_id": 7})"), c);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(*single, (std::vector<int32_t>{5, 7, 309}));
  auto none = LoadEosTokenIds(DirWith("none", ""), c);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, (std::vector<int32_t>{5, 309}));
  auto no_field = LoadEosTokenIds(DirWith("nofield", R"({"do_sample": true})"), c);
  ASSERT_TRUE(no_field.ok());
  EXPECT_EQ(*no_field, (std::vector<int32_t>{5, 309}));
}

TEST(GenerationConfig, AbsentFileIsEmpty) {
  auto g = LoadGenerationConfig(DirWith("absent", "") + "/generation_config.json");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->present);
  EXPECT_TRUE(g->eos_token_ids.empty());
}

TEST(GenerationConfig, MalformedNamesFileAndField) {
  auto bad_json = LoadGenerationConfig(DirWith("badjson", "{not json") + "/generation_config.json");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_json.status().message().find("generation_config.json"), std::string::npos);
  EXPECT_NE(bad_json.status().message().find("not valid JSON"), std::string::npos);
  for (const char* text : {R"({"eos_token_id": "2"})", R"({"eos_token_id": [1, 2.5]})",
                           R"({"eos_token_id": [[1]]})"}) {
    auto g = LoadGenerationConfig(DirWith("badfield", text) + "/generation_config.json");
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find("eos_token_id"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace mx::generation_config_test
