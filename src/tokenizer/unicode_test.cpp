// UTF-8 decoding/replacement, byte-level alphabet and NFC against Python unicodedata goldens.
#include "tokenizer/unicode.h"

#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_test_util.h"

namespace mx::tok {
namespace {

TEST(Utf8, DecodeValid) {
  const std::string s = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80";  // a é 你 😀
  size_t pos = 0;
  char32_t cp;
  std::vector<char32_t> got;
  while (pos < s.size()) {
    ASSERT_TRUE(DecodeUtf8(s, &pos, &cp));
    got.push_back(cp);
  }
  EXPECT_TRUE(got == (std::vector<char32_t>{U'a', 0xE9, 0x4F60, 0x1F600}));
}

TEST(Utf8, SanitizeUsesMaximalSubparts) {
  // Examples from Unicode §3.9 (U+FFFD substitution of maximal subparts).
  EXPECT_EQ(SanitizeUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d");
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // > U+10FFFF
  EXPECT_EQ(SanitizeUtf8("ok\xE4\xBD"), "ok\xEF\xBF\xBD");        // truncated at end
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xF0\x9F\x98"));
}

TEST(Utf8, EmittablePrefixHoldsOnlyIncompleteCharacters) {
  EXPECT_EQ(EmittableUtf8Prefix("abc"), 3u);
  EXPECT_EQ(EmittableUtf8Prefix("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(EmittableUtf8Prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(EmittableUtf8Prefix("ab\xE4"), 2u);
  EXPECT_EQ(EmittableUtf8Prefix("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(EmittableUtf8Prefix("ab\x80\x80\x80"), 5u);  // stray continuations: invalid now
  EXPECT_EQ(EmittableUtf8Prefix("ab\xC0"), 3u);          // never a lead byte
  EXPECT_EQ(EmittableUtf8Prefix("ab\xE0\x80"), 4u);      // invalid second byte
  EXPECT_EQ(EmittableUtf8Prefix(""), 0u);
}

TEST(Utf8, AppendRoundTripsEveryScalarValue) {
  std::string s;
  for (char32_t c = 0; c <= 0x10FFFF; c += (c < 0x3000 ? 1 : 97)) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    s.clear();
    AppendUtf8(&s, c);
    size_t pos = 0;
    char32_t back;
    ASSERT_TRUE(DecodeUtf8(s, &pos, &back)) << static_cast<uint32_t>(c);
    ASSERT_EQ(static_cast<uint32_t>(back), static_cast<uint32_t>(c));
    ASSERT_EQ(pos, s.size());
  }
}

TEST(ByteLevel, MatchesGpt2Table) {
  ByteLevelAlphabet a;
  EXPECT_EQ(a.CharOf(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(a.CharOf('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(a.CharOf('A'), static_cast<char32_t>('A'));
  EXPECT_EQ(a.CharOf(0xAD), 0x143u);
  EXPECT_EQ(a.CharOf(0xFF), 0xFFu);
  std::string raw;
  for (int b = 0; b < 256; ++b) raw.push_back(static_cast<char>(b));
  std::string enc, dec;
  a.Encode(raw, &enc);
  ASSERT_TRUE(a.Decode(enc, &dec));
  EXPECT_EQ(dec, raw);
  std::string bad;
  EXPECT_FALSE(a.Decode("a b", &bad));  // U+0020 is not in the alphabet
}

TEST(Nfc, HandPickedCases) {
  EXPECT_EQ(NfcNormalize("cafe\xCC\x81"), "caf\xC3\xA9");  // e + acute -> é
  EXPECT_EQ(NfcNormalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  EXPECT_EQ(NfcNormalize("\xE2\x84\xAB"), "\xC3\x85");                              // Å sign -> Å
  EXPECT_EQ(NfcNormalize("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // excluded: stays apart
  EXPECT_EQ(NfcNormalize("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");         // reorder then compose
  EXPECT_EQ(NfcNormalize("\xCC\x81"
                         "a"),
            "\xCC\x81"
            "a");  // leading mark
  EXPECT_EQ(NfcNormalize("plain ascii"), "plain ascii");
  EXPECT_TRUE(IsNfcQuickYes("plain ascii \xE4\xBD\xA0\xE5\xA5\xBD"));
  EXPECT_FALSE(IsNfcQuickYes("e\xCC\x81"));
}

TEST(Nfc, MatchesPythonUnicodedataGoldens) {
  const std::string text =
      testing::ReadFileOrEmpty(testing::TokenizerTestDir() + "/nfc.golden.json");
  ASSERT_FALSE(text.empty()) << "missing tests/tokenizer/nfc.golden.json";
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["unicode_version"].get<std::string>(), NfcUnicodeVersion());
  int failures = 0;
  for (const auto& c : j["cases"]) {
    const std::string in = c[0], want = c[1];
    const std::string got = NfcNormalize(in);
    if (got != want && ++failures <= 10) ADD_FAILURE() << "NFC mismatch for input " << c[0].dump();
    if (IsNfcQuickYes(in)) {
      EXPECT_EQ(in, want) << c[0].dump();
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(j["cases"].size(), 5000u);
}

}  // namespace
}  // namespace mx::tok
