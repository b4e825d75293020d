// Streaming detokenizer: chunks are complete UTF-8 and concatenate to the whole-sequence decode.
#include "tokenizer/detokenizer.h"

#include <random>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/unicode.h"

namespace mx::tok {
namespace {

Tokenizer Load(const std::string& name) {
  auto r = Tokenizer::FromFile(testing::TokenizerTestDir() + "/" + name);
  if (!r.ok()) ADD_FAILURE() << r.status().ToString();
  return std::move(r).value();
}

std::string StreamAll(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                      std::vector<std::string>* chunks) {
  StreamingDetokenizer d(tok, skip);
  std::string all;
  for (int32_t id : ids) {
    std::string c = d.Push(id);
    if (!c.empty()) {
      EXPECT_TRUE(IsValidUtf8(c));
      if (chunks) chunks->push_back(c);
      all += c;
    }
  }
  std::string tail = d.Finish();
  if (chunks && !tail.empty()) chunks->push_back(tail);
  EXPECT_EQ(d.pending_bytes(), 0u);
  return all + tail;
}

TEST(StreamingDetokenizer, NeverSplitsACharacter) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  // An emoji is 4 bytes, each its own byte-level token here.
  const std::string text =
      "a\xF0\x9F\x98\x80"
      "b \xE4\xBD\xA0\xE5\xA5\xBD";
  const auto ids = tok.Encode(text);
  std::vector<std::string> chunks;
  EXPECT_EQ(StreamAll(tok, ids, false, &chunks), text);
  for (const auto& c : chunks) EXPECT_TRUE(IsValidUtf8(c)) << c;
  // The emoji arrives as one chunk.
  EXPECT_NE(std::find(chunks.begin(), chunks.end(), "\xF0\x9F\x98\x80"), chunks.end());
}

TEST(StreamingDetokenizer, DanglingBytesBecomeReplacementAtFinish) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  const auto ids = tok.Encode("x\xF0\x9F\x98\x80");
  std::vector<int32_t> cut(ids.begin(), ids.end() - 1);  // drop the emoji's last byte token
  StreamingDetokenizer d(tok, false);
  std::string out;
  for (int32_t id : cut) out += d.Push(id);
  EXPECT_EQ(out, "x");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.Finish(), kReplacementUtf8);
  EXPECT_EQ(tok.Decode(cut), std::string("x") + std::string(kReplacementUtf8));
}

TEST(StreamingDetokenizer, SkipsSpecialTokens) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  const auto ids = tok.Encode("<|user|>hi<think>there</think>");
  EXPECT_EQ(StreamAll(tok, ids, true, nullptr), "hithere");
  EXPECT_EQ(StreamAll(tok, ids, false, nullptr), "<|user|>hi<think>there</think>");
}

// Random id sequences (arbitrary byte tokens, so plenty of invalid UTF-8) stream to exactly
// the whole-sequence decode.
TEST(StreamingDetokenizer, EqualsWholeDecodeOnRandomIds) {
  for (const char* name : {"glm_style.tokenizer.json", "gpt2_style.tokenizer.json"}) {
    Tokenizer tok = Load(name);
    std::mt19937 rng(11);
    for (int iter = 0; iter < 500; ++iter) {
      std::vector<int32_t> ids(rng() % 50);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % (tok.vocab_size() + 3)) - 1;
      for (bool skip : {false, true}) {
        ASSERT_EQ(StreamAll(tok, ids, skip, nullptr), tok.Decode(ids, skip))
            << name << " iteration " << iter;
      }
    }
  }
}

TEST(StreamingDetokenizer, NullDecoderJoinsWithSpaces) {
  auto tok = Tokenizer::FromJson(R"({"decoder": null, "pre_tokenizer": null,
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}})");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<int32_t> ids = {2, 0, 1};
  EXPECT_EQ(tok->Decode(ids), "ab a b");
  EXPECT_EQ(StreamAll(*tok, ids, false, nullptr), "ab a b");
}

}  // namespace
}  // namespace mx::tok
