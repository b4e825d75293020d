// EnsureSyntheticTokenizer writes the kind asked for, once; make_checkpoint's tokenizer= picks
// the kind (and refuses a name it does not know, writing nothing) on the tiny test config with a
// 32,000-token vocabulary (so that the space-letter merges exist).
#include "random_checkpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace mx::bench {
namespace {
namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path FreshDir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// tests/data/tiny's config with vocab_size 32000, written to dir/config.json.
fs::path WriteConfig(const fs::path& dir) {
  nlohmann::json j =
      nlohmann::json::parse(ReadAll(fs::path(MX_SOURCE_DIR) / "tests/data/tiny/config.json"));
  j["vocab_size"] = 32000;
  const fs::path p = dir / "config.json";
  std::ofstream(p) << j.dump(2);
  return p;
}

// " a b" in the gguf-bpe vocabulary: space+a, space+b (pool index 62 is the space).
const std::vector<int32_t> kSpaceAB = {256 + 256 * 62, 256 + 256 * 62 + 1};

TEST(EnsureSyntheticTokenizer, WritesTheKindAskedForOnce) {
  const fs::path dir = FreshDir("mx_synth_tok_gguf");
  WriteConfig(dir);
  ASSERT_TRUE(EnsureSyntheticTokenizer(dir.string(), tok::SyntheticVocab::kGgufBpe).ok());
  auto t = tok::Tokenizer::FromFile((dir / "tokenizer.json").string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->vocab_size(), 32000);
  EXPECT_EQ(t->Encode(" a b", false), kSpaceAB);
  // The config's EOS ids and pad id are special.
  EXPECT_TRUE(t->IsSpecial(300) && t->IsSpecial(307) && t->IsSpecial(309));
  EXPECT_FALSE(t->IsSpecial(301));
  // Written once: asking again for the other kind keeps the file.
  const std::string before = ReadAll(dir / "tokenizer.json");
  ASSERT_TRUE(EnsureSyntheticTokenizer(dir.string()).ok());
  EXPECT_EQ(ReadAll(dir / "tokenizer.json"), before);
  // The default kind has no split: " a b" encodes otherwise.
  const fs::path dir2 = FreshDir("mx_synth_tok_pairs");
  WriteConfig(dir2);
  ASSERT_TRUE(EnsureSyntheticTokenizer(dir2.string()).ok());
  auto t2 = tok::Tokenizer::FromFile((dir2 / "tokenizer.json").string());
  ASSERT_TRUE(t2.ok()) << t2.status().ToString();
  EXPECT_NE(t2->Encode(" a b", false), kSpaceAB);
  EXPECT_EQ(t2->Decode(t2->Encode(" a b", false)), " a b");
  fs::remove_all(dir);
  fs::remove_all(dir2);
}

struct CmdResult {
  int code = -1;
  std::string out;  // stdout and stderr
};

CmdResult MakeCheckpoint(const std::string& args) {
  const std::string cmd = std::string(MX_MAKE_CHECKPOINT_BIN) + " " + args + " 2>&1";
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(MakeCheckpoint, TokenizerFlagPicksTheVocabulary) {
  const fs::path dir = FreshDir("mx_make_ckpt_gguf");
  const fs::path config = WriteConfig(dir);
  const CmdResult r = MakeCheckpoint("config=" + config.string() + " dir=" + dir.string() +
                                     " formats=bf16 layers=-1 dense=-1 mtp=-1 threads=1"
                                     " tokenizer=gguf-bpe");
  ASSERT_EQ(r.code, 0) << r.out;
  auto t = tok::Tokenizer::FromFile((dir / "bf16" / "tokenizer.json").string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Encode(" a b", false), kSpaceAB);
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir / "bf16" / "tokenizer.json"));
  EXPECT_EQ(j["pre_tokenizer"]["type"], "Sequence");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["type"], "Split");
  fs::remove_all(dir);
}

TEST(MakeCheckpoint, UnknownTokenizerIsRefusedBeforeWriting) {
  const fs::path dir = FreshDir("mx_make_ckpt_bad");
  const fs::path config = WriteConfig(dir);
  for (const char* bad : {"gguf", "GGUF-BPE", ""}) {
    const CmdResult r = MakeCheckpoint("config=" + config.string() + " dir=" + dir.string() +
                                       " formats=bf16 layers=-1 dense=-1 mtp=-1 tokenizer=" + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("expected printable-pairs or gguf-bpe"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "bf16")) << bad;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mx::bench
