// The synthetic tokenizer.json loads in the project's tokenizer, has exactly the asked size,
// decodes every byte id to its byte and every merge to its two bytes, round-trips random byte
// strings, marks the special ids, and refuses sizes it cannot fill.
#include "tokenizer/synthetic_tokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace mx::tok
