// The synthetic tokenizer.json loads in the project's tokenizer, has exactly the asked size,
// decodes every byte id to its byte and every merge to its two bytes, round-trips random byte
// strings, marks the special ids, and refuses sizes it cannot fill. The gguf-bpe vocabulary is
// also compared token for token and merge for merge with ../shared/anchors/hf_to_gguf.py's
// make_vocab (when /usr/bin/python3 has numpy to import it).
#include "tokenizer/synthetic_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace mx::tok {
namespace {

TEST(SyntheticTokenizer, LoadsWithExactlyItsSizeAndDecodesBytesAndMerges) {
  for (int32_t v : {256, 300, 32000, 154880}) {
    auto text = SyntheticTokenizerJson(v, {2, 3, 4, 2});
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto t = Tokenizer::FromJson(*text);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->vocab_size(), v);
    // Bytes below 0x80 decode to themselves (a lone byte above is not UTF-8: U+FFFD).
    for (int32_t b = 0; b < 128; ++b) {
      const int32_t id[] = {b};
      ASSERT_EQ(t->Decode(id), std::string(1, static_cast<char>(b))) << "byte " << b;
    }
    // Merge 256 + 188 i + j is GPT-2's printable byte i followed by printable byte j.
    std::vector<int32_t> printable;
    for (int32_t b = 0; b < 256; ++b) {
      if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) printable.push_back(b);
    }
    ASSERT_EQ(printable.size(), 188u);
    // Past the pairs, id 256 + 188² + 188 p + j is pair 256 + p followed by printable byte j.
    constexpr int32_t kPairsEnd = 256 + 188 * 188;
    for (int32_t id = 256; id < v; ++id) {
      const int32_t one[] = {id};
      if (id < kPairsEnd) {
        const int32_t two[] = {printable[(id - 256) / 188], printable[(id - 256) % 188]};
        ASSERT_EQ(t->Decode(one), t->Decode(two)) << "id " << id;
      } else {
        const int32_t pair = 256 + (id - kPairsEnd) / 188;
        const int32_t three[] = {printable[(pair - 256) / 188], printable[(pair - 256) % 188],
                                 printable[(id - kPairsEnd) % 188]};
        ASSERT_EQ(t->Decode(one), t->Decode(three)) << "id " << id;
      }
    }
    EXPECT_TRUE(t->IsSpecial(2) && t->IsSpecial(3) && t->IsSpecial(4));
    EXPECT_FALSE(t->IsSpecial(5));
    // Random printable byte strings (no special bytes) encode and decode back.
    std::mt19937 rng(static_cast<uint32_t>(v));
    for (int round = 0; round < 50; ++round) {
      std::string s;
      const int n = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(0x21 + rng() % 94));
      const std::vector<int32_t> ids = t->Encode(s);
      for (int32_t id : ids) ASSERT_LT(id, v);
      EXPECT_EQ(t->Decode(ids), s);
      if (v >= 32000 && n >= 2) EXPECT_LT(ids.size(), s.size()) << "merges apply";
    }
  }
}

TEST(SyntheticTokenizer, RefusesSizesItCannotFillAndSpecialsOutside) {
  EXPECT_FALSE(SyntheticTokenizerJson(255, {}).ok());
  EXPECT_FALSE(SyntheticTokenizerJson(256 + 188 * 188 + 188 * 188 * 188 + 1, {}).ok());
  EXPECT_TRUE(SyntheticTokenizerJson(256 + 188 * 188 + 1, {}).ok());
  const auto bad = SyntheticTokenizerJson(300, {300});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("special id 300"), std::string::npos);
}

// hf_to_gguf.py's pool order: a-z, A-Z, 0-9, space, then every other byte in byte order.
std::vector<int32_t> GgufPool() {
  std::vector<int32_t> pool;
  for (int32_t b = 'a'; b <= 'z'; ++b) pool.push_back(b);
  for (int32_t b = 'A'; b <= 'Z'; ++b) pool.push_back(b);
  for (int32_t b = '0'; b <= '9'; ++b) pool.push_back(b);
  pool.push_back(' ');
  for (int32_t b = 0; b < 256; ++b) {
    if (std::find(pool.begin(), pool.end(), b) == pool.end()) pool.push_back(b);
  }
  return pool;
}

TEST(SyntheticTokenizer, GgufBpeIdsAreHfToGgufsPoolOrder) {
  const std::vector<int32_t> pool = GgufPool();
  ASSERT_EQ(pool.size(), 256u);
  for (int32_t v : {256, 32000, 256 + 256 * 256 + 700}) {
    auto text = SyntheticTokenizerJson(v, {}, SyntheticVocab::kGgufBpe);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto t = Tokenizer::FromJson(*text);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->vocab_size(), v);
    constexpr int32_t kPairsEnd = 256 + 256 * 256;
    for (int32_t id = 0; id < v; ++id) {
      std::string want;
      if (id < 256) {
        want = std::string(1, static_cast<char>(id));
      } else if (id < kPairsEnd) {
        want = {static_cast<char>(pool[(id - 256) / 256]),
                static_cast<char>(pool[(id - 256) % 256])};
      } else {
        const int32_t pair = (id - kPairsEnd) / 256;
        want = {static_cast<char>(pool[pair / 256]), static_cast<char>(pool[pair % 256]),
                static_cast<char>(pool[(id - kPairsEnd) % 256])};
      }
      ASSERT_EQ(t->TokenBytes(id), want) << "id " << id;
    }
  }
}

TEST(SyntheticTokenizer, GgufBpeSplitsWithGlm4sRegexAndMerges) {
  auto text = SyntheticTokenizerJson(32000, {2, 3, 4}, SyntheticVocab::kGgufBpe);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto t = Tokenizer::FromJson(*text);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // Pool indices: a..z 0..25, A..Z 26..51, 0..9 52..61, space 62; pair (i, j) is 256 + 256 i + j.
  auto pair = [](int32_t i, int32_t j) { return 256 + 256 * i + j; };
  // " a b": two pieces (" a", " b"), each the merge of space and a letter. (Unsplit, "a" would
  // merge with the space after it first: row a comes before row space.)
  EXPECT_EQ(t->Encode(" a b", false), (std::vector<int32_t>{pair(62, 0), pair(62, 1)}));
  // "hello": 'e l' outranks 'h e' (row e before row h), then 'l o'; no pair merges further.
  EXPECT_EQ(t->Encode("hello", false), (std::vector<int32_t>{'h', pair(4, 11), pair(11, 14)}));
  // Pieces "x", " =", " ", "123", "45", ";": digits go in threes. '=' is pool index 113 (63 +
  // the 50 bytes below 0x3D that are not a digit or space); "12" outranks "23".
  EXPECT_EQ(t->Encode("x = 12345;", false),
            (std::vector<int32_t>{'x', pair(62, 113), ' ', pair(53, 54), '3', pair(56, 57), ';'}));
  const std::string code = "if (x) {\n  return y; // IT'S 2026 \xC3\xA9t\xC3\xA9\n}\n";
  EXPECT_EQ(t->Decode(t->Encode(code, false)), code);
  // The EOS / pad ids are special.
  EXPECT_TRUE(t->IsSpecial(2) && t->IsSpecial(3) && t->IsSpecial(4));
  EXPECT_FALSE(t->IsSpecial(5));
}

// Token for token and merge for merge against hf_to_gguf.py's make_vocab (the GGUF's vocabulary).
TEST(SyntheticTokenizer, GgufBpeIsHfToGgufsVocabulary) {
  namespace fs = std::filesystem;
  const fs::path script = fs::path(MX_SHARED_DIR) / "anchors" / "hf_to_gguf.py";
  if (!fs::exists(script) ||
      std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no " << script << " or no /usr/bin/python3 with numpy";
  }
  for (int32_t v : {300, 32000, 256 + 256 * 256 + 300}) {
    const fs::path out = fs::path(::testing::TempDir()) / "mx_make_vocab.json";
    const std::string cmd = "/usr/bin/python3 -c \"import sys, json; sys.path.insert(0, '" +
                            script.parent_path().string() +
                            "'); import hf_to_gguf as h; t, m = h.make_vocab(" + std::to_string(v) +
                            "); json.dump([t, m], open('" + out.string() + "', 'w'))\"";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json want = nlohmann::json::parse(ss.str());
    fs::remove(out);
    auto text = SyntheticTokenizerJson(v, {}, SyntheticVocab::kGgufBpe);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    const nlohmann::json got = nlohmann::json::parse(*text);
    const nlohmann::json& vocab = got["model"]["vocab"];
    ASSERT_EQ(vocab.size(), want[0].size()) << v;
    for (size_t id = 0; id < want[0].size(); ++id) {
      const std::string tok = want[0][id].get<std::string>();
      ASSERT_TRUE(vocab.contains(tok)) << "id " << id;
      ASSERT_EQ(vocab[tok].get<size_t>(), id) << "id " << id;
    }
    EXPECT_EQ(got["model"]["merges"], want[1]) << v;
  }
}

TEST(SyntheticTokenizer, VocabNamesParseAndUnknownOnesAreRefused) {
  EXPECT_EQ(*ParseSyntheticVocab("printable-pairs"), SyntheticVocab::kPrintablePairs);
  EXPECT_EQ(*ParseSyntheticVocab("gguf-bpe"), SyntheticVocab::kGgufBpe);
  for (const char* bad : {"", "gguf", "GGUF-BPE", "gguf_bpe", "gguf-bpe ", "printable"}) {
    const auto r = ParseSyntheticVocab(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("gguf-bpe"), std::string::npos) << bad;
  }
  EXPECT_FALSE(SyntheticTokenizerJson(255, {}, SyntheticVocab::kGgufBpe).ok());
  EXPECT_TRUE(SyntheticTokenizerJson(256 + 256 * 256 + 1, {}, SyntheticVocab::kGgufBpe).ok());
}

}  // namespace
}  // namespace mx::tok
