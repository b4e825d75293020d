// Tokenizer against goldens from tools/bpe_reference.py (an independent Python BPE), plus
// round trips, invalid input, complexity on 1 MB and malformed tokenizer.json files.
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/unicode.h"

namespace mx::tok::tokenizer_test {
namespace {

using testing::ReadFileOrEmpty;
using testing::TokenizerTestDir;

Tokenizer Load(const std::string& name) {
  auto r = Tokenizer::FromFile(TokenizerTestDir() + "/" + name);
  if (!r.ok()) ADD_FAILURE() << r.status().ToString();
  return std::move(r).value();
}

std::vector<std::string> GoldenFiles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(TokenizerTestDir())) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".golden.json") && name != "nfc.golden.json") out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, EncodeAndDecodeMatchReference) {
  const auto j = nlohmann::json::parse(ReadFileOrEmpty(TokenizerTestDir() + "/" + GetParam()));
  const std::string tok_path = TokenizerTestDir() + "/" + j["tokenizer"].get<std::string>();
  if (!std::filesystem::exists(tok_path)) GTEST_SKIP() << "no " << tok_path;
  auto tok = Tokenizer::FromFile(tok_path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  int failures = 0;
  for (const auto& c : j["cases"]) {
    const std::string text = c["text"];
    const bool allow = c["allow_special"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto got = tok->Encode(text, allow);
    if (got != want) {
      if (++failures <= 5) {
        ADD_FAILURE() << GetParam() << ": encode mismatch for " << nlohmann::json(text).dump()
                      << " allow_special=" << allow << "\n  want " << nlohmann::json(want).dump()
                      << "\n  got  " << nlohmann::json(got).dump();
      }
      continue;
    }
    EXPECT_EQ(tok->Decode(want, false), c["decoded"].get<std::string>()) << text;
    EXPECT_EQ(tok->Decode(want, true), c["decoded_skip_special"].get<std::string>()) << text;
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, GoldenTest, ::testing::ValuesIn(GoldenFiles()),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find('.'));
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(Tokenizer, GoldensExist) { EXPECT_GE(GoldenFiles().size(), 7u); }

TEST(Tokenizer, Accessors) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  auto eot = tok.TokenId("<|endoftext|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_TRUE(tok.IsSpecial(*eot));
  EXPECT_EQ(tok.TokenText(*eot), "<|endoftext|>");
  auto nothink = tok.TokenId("/nothink");
  ASSERT_TRUE(nothink.has_value());
  EXPECT_FALSE(tok.IsSpecial(*nothink));
  EXPECT_EQ(tok.vocab_size(), *nothink + 1);
  auto space = tok.TokenId("\xC4\xA0");  // 'Ġ'
  ASSERT_TRUE(space.has_value());
  EXPECT_EQ(tok.TokenBytes(*space), " ");
  EXPECT_EQ(tok.TokenText(-1), "");
  EXPECT_EQ(tok.TokenText(tok.vocab_size()), "");
  EXPECT_FALSE(tok.IsSpecial(1 << 29));
  EXPECT_TRUE(tok.Encode("").empty());
  const std::vector<int32_t> bad = {1, 2, tok.vocab_size() + 5};
  Status st = tok.CheckIds(bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("at index 2"), std::string::npos) << st.message();
  EXPECT_EQ(tok.Decode(bad), tok.Decode(std::vector<int32_t>{1, 2}));  // unknown ids skipped
}

TEST(Tokenizer, SpecialTokensOnlyWhenAllowed) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  const int32_t user = *tok.TokenId("<|user|>");
  auto with = tok.Encode("a<|user|>b", true);
  auto without = tok.Encode("a<|user|>b", false);
  EXPECT_NE(std::find(with.begin(), with.end(), user), with.end());
  EXPECT_EQ(std::find(without.begin(), without.end(), user), without.end());
  EXPECT_EQ(tok.Decode(without), "a<|user|>b");
  EXPECT_EQ(tok.Decode(with, /*skip_special=*/true), "ab");
  // A non-special added token is matched even when special tokens are not allowed.
  const int32_t nothink = *tok.TokenId("/nothink");
  auto nt = tok.Encode("x /nothink", false);
  EXPECT_NE(std::find(nt.begin(), nt.end(), nothink), nt.end());
}

// Random valid Unicode, including multi-byte code points, survives encode -> decode.
TEST(Tokenizer, RoundTripsRandomUnicode) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  std::mt19937 rng(42);
  const char32_t ranges[][2] = {{0x20, 0x7E},     {0x09, 0x0D},       {0xA0, 0x2FF},
                                {0x300, 0x36F},   {0x400, 0x4FF},     {0x4E00, 0x9FFF},
                                {0xAC00, 0xD7A3}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF},
                                {0xE000, 0xFFFD}};
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 60);
    for (int k = 0; k < len; ++k) {
      const auto& r = ranges[rng() % std::size(ranges)];
      char32_t c = r[0] + rng() % (r[1] - r[0] + 1);
      if (c >= 0xD800 && c <= 0xDFFF) c = 'x';
      AppendUtf8(&s, c);
    }
    const auto ids = tok.Encode(s);
    ASSERT_EQ(tok.Decode(ids), s) << "iteration " << iter;
  }
}

TEST(Tokenizer, InvalidUtf8IsReplacedNotFatal) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  const std::string bad = "ok \xFF\xFE bytes \xE4\xBD and \xC0\xAF end\xF0\x9F";
  const auto ids = tok.Encode(bad);
  EXPECT_EQ(tok.Decode(ids), SanitizeUtf8(bad));
  EXPECT_EQ(tok.Encode(bad), tok.Encode(SanitizeUtf8(bad)));
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::string s;
    for (int k = static_cast<int>(rng() % 40); k > 0; --k) s.push_back(static_cast<char>(rng()));
    EXPECT_EQ(tok.Decode(tok.Encode(s)), SanitizeUtf8(s));
  }
}

// 1 MB inputs: the merge loop does O(n) heap work (no quadratic blow-up), counted, not timed.
TEST(Tokenizer, OneMegabyteIsLinear) {
  Tokenizer tok = Load("glm_style.tokenizer.json");
  const size_t n = 1 << 20;
  std::string english;
  const std::string para =
      "The quick brown fox jumps over the lazy dog; it's 2024 and we're testing 1234567 "
      "tokens.\n  Code: for (int i = 0; i < n; ++i) { x += y; }  \xE4\xBD\xA0\xE5\xA5\xBD "
      "\xF0\x9F\x98\x80\n";
  while (english.size() < n) english += para;
  const std::vector<std::string> inputs = {std::string(n, 'a'), std::string(n, ' '),
                                           std::string(n, '9'), english,
                                           std::string(n / 2, '\n') + std::string(n / 2, 'x')};
  for (const std::string& in : inputs) {
    const uint64_t before = tok.bpe_heap_pops();
    const auto ids = tok.Encode(in);
    const uint64_t pops = tok.bpe_heap_pops() - before;
    EXPECT_LE(pops, 4 * in.size()) << "input starting " << in.substr(0, 10);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.Decode(ids), in);
  }
}

// Encode from several threads at once (shared piece cache) gives the single-thread answer.
TEST(Tokenizer, ConcurrentEncodeAgrees) {
  Tokenizer tok = Load("gpt2_style.tokenizer.json");
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back("thread " + std::to_string(i * 7919) + " caf\xC3\xA9 the quick brown fox " +
                    std::string(i % 5, ' ') + "\xE4\xBD\xA0\xE5\xA5\xBD <mask> x" +
                    std::to_string(i));
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : texts) want.push_back(tok.Encode(t));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + t * 13 + rep) % texts.size();
          if (tok.Encode(texts[k]) != want[k]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Tokenizer, NormalizedAddedTokenMatchesAfterNfc) {
  Tokenizer tok = Load("gpt2_style.tokenizer.json");
  const int32_t cafe = *tok.TokenId("caf\xC3\xA9");
  auto ids = tok.Encode("a cafe\xCC\x81!");  // decomposed é composes, then matches
  EXPECT_NE(std::find(ids.begin(), ids.end(), cafe), ids.end());
}

// The test checkpoint's own cases (tools/make_fixtures.py, a third implementation).
TEST(Tokenizer, TinyCheckpointFixtureCases) {
  const std::string dir = std::string(MX_TEST_DATA_DIR) + "/tiny";
  const std::string cases_text = ReadFileOrEmpty(dir + "/fixtures/tokenizer_cases.json");
  if (cases_text.empty()) GTEST_SKIP() << "no " << dir << "/fixtures/tokenizer_cases.json";
  auto tok = Tokenizer::FromFile(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const nlohmann::json cases = nlohmann::json::parse(cases_text);  // outlives the loop
  for (const auto& c : cases["cases"]) {
    const auto want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->Encode(c["text"].get<std::string>()), want) << c["text"];
    EXPECT_EQ(tok->Decode(want), c["text"].get<std::string>());
  }
  EXPECT_EQ(tok->TokenId("<|endoftext|>"), 300);
  EXPECT_TRUE(tok->IsSpecial(300));
  EXPECT_EQ(tok->vocab_size(), 320);
}

// ---- malformed tokenizer.json ---------------------------------------------------------------

std::string MinimalJson() {
  return R"({"added_tokens": [{"id": 3, "content": "<s>", "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";
}

Status LoadWith(const std::string& pointer, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(MinimalJson());
  if (value.is_discarded()) {
    j.erase(pointer.substr(1));  // a top-level key
  } else {
    j[nlohmann::json::json_pointer(pointer)] = value;
  }
  auto r = Tokenizer::FromJson(j.dump());
  return r.ok() ? Status::Ok() : r.status();
}

TEST(TokenizerMalformed, MinimalLoads) {
  auto r = Tokenizer::FromJson(MinimalJson());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->Encode("ab<s>ba"), (std::vector<int32_t>{2, 3, 1, 0}));
}

TEST(TokenizerMalformed, ErrorsNameTheField) {
  using J = nlohmann::json;
  struct Case {
    std::string pointer;
    J value;
    std::string expect;  // substring of the message
    StatusCode code;
  };
  const std::vector<Case> cases = {
      {"/model/type", "WordPiece", "model.type: model \"WordPiece\"", StatusCode::kUnimplemented},
      {"/model/type", 5, "model.type", StatusCode::kDataLoss},
      {"/model/vocab", J::array(), "model.vocab", StatusCode::kDataLoss},
      {"/model/vocab/a", "x", "model.vocab[\"a\"]", StatusCode::kDataLoss},
      {"/model/vocab/a", -1, "model.vocab[\"a\"]", StatusCode::kDataLoss},
      {"/model/vocab/b", 0, "id 0 is used by both", StatusCode::kDataLoss},
      {"/model/merges", "a b", "model.merges", StatusCode::kDataLoss},
      {"/model/merges/0", "ab", "model.merges[0]", StatusCode::kDataLoss},
      {"/model/merges/0", "a b c", "model.merges[0]", StatusCode::kDataLoss},
      {"/model/merges/0", J::array({"a"}), "model.merges[0]", StatusCode::kDataLoss},
      {"/model/merges/0", "a z", "model.merges[0]: token \"z\"", StatusCode::kDataLoss},
      {"/model/merges/0", J::array({"b", "a"}), "model.merges[0]: token \"ba\"",
       StatusCode::kDataLoss},
      {"/model/dropout", 0.1, "model.dropout", StatusCode::kUnimplemented},
      {"/model/unk_token", "<unk>", "model.unk_token", StatusCode::kDataLoss},
      {"/model/continuing_subword_prefix", "##", "model.continuing_subword_prefix",
       StatusCode::kUnimplemented},
      {"/model/ignore_merges", "yes", "model.ignore_merges", StatusCode::kDataLoss},
      {"/normalizer", J{{"type", "NFKC"}}, "normalizer.type: normalizer \"NFKC\"",
       StatusCode::kUnimplemented},
      {"/normalizer",
       J{{"type", "Sequence"}, {"normalizers", J::array({J{{"type", "Lowercase"}}})}},
       "normalizer.normalizers[0].type", StatusCode::kUnimplemented},
      {"/normalizer", J{{"type", "Sequence"}}, "normalizer.normalizers", StatusCode::kDataLoss},
      {"/pre_tokenizer", J{{"type", "Metaspace"}},
       "pre_tokenizer.type: pre-tokenizer \"Metaspace\"", StatusCode::kUnimplemented},
      {"/pre_tokenizer",
       J{{"type", "Split"}, {"pattern", J{{"Regex", "("}}}, {"behavior", "Isolated"}},
       "pre_tokenizer.pattern", StatusCode::kInvalidArgument},
      {"/pre_tokenizer",
       J{{"type", "Split"}, {"pattern", J{{"Regex", "a"}}}, {"behavior", "Sideways"}},
       "pre_tokenizer.behavior", StatusCode::kUnimplemented},
      {"/pre_tokenizer", J{{"type", "Split"}, {"pattern", "a"}, {"behavior", "Isolated"}},
       "pre_tokenizer.pattern", StatusCode::kDataLoss},
      {"/pre_tokenizer",
       J{{"type", "Sequence"},
         {"pretokenizers", J::array({J{{"type", "Digits"}}, J{{"type", "Whitespace"}}})}},
       "pre_tokenizer.pretokenizers[1].type", StatusCode::kUnimplemented},
      {"/pre_tokenizer/add_prefix_space", "no", "pre_tokenizer.add_prefix_space",
       StatusCode::kDataLoss},
      {"/decoder", J{{"type", "WordPiece"}}, "decoder.type: decoder \"WordPiece\"",
       StatusCode::kUnimplemented},
      {"/post_processor", J{{"type", "BertProcessing"}}, "post_processor.type",
       StatusCode::kUnimplemented},
      {"/added_tokens", J::object(), "added_tokens", StatusCode::kDataLoss},
      {"/added_tokens/0/id", "3", "added_tokens[0].id", StatusCode::kDataLoss},
      {"/added_tokens/0/content", 3, "added_tokens[0].content", StatusCode::kDataLoss},
      {"/added_tokens/0/lstrip", 1, "added_tokens[0].lstrip", StatusCode::kDataLoss},
      {"/model", J(J::value_t::discarded), "model: missing", StatusCode::kDataLoss},
  };
  for (const auto& c : cases) {
    Status st = LoadWith(c.pointer, c.value);
    EXPECT_FALSE(st.ok()) << c.pointer << " = " << c.value.dump();
    EXPECT_EQ(st.code(), c.code) << st.ToString();
    EXPECT_NE(st.message().find(c.expect), std::string::npos)
        << "message: " << st.message() << "\nexpected to contain: " << c.expect;
  }
}

TEST(TokenizerMalformed, NotJsonAndMissingFile) {
  EXPECT_EQ(Tokenizer::FromJson("{\"model\": ").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(Tokenizer::FromJson("[1, 2]").status().code(), StatusCode::kDataLoss);
  auto r = Tokenizer::FromFile("/nonexistent/tokenizer.json");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

// Random byte flips in a valid file: every outcome is a Status or a working tokenizer.
TEST(TokenizerMalformed, RandomCorruptionNeverCrashes) {
  const std::string good = ReadFileOrEmpty(TokenizerTestDir() + "/gpt2_style.tokenizer.json");
  ASSERT_FALSE(good.empty());
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]\",:0123456789 abtrue-null\\";
  int loaded = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string s = good;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = alphabet[rng() % alphabet.size()];
    auto r = Tokenizer::FromJson(s);
    if (r.ok()) {
      ++loaded;
      const auto ids = r->Encode("Hello world 123 caf\xC3\xA9 <mask>");
      (void)r->Decode(ids);
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  RecordProperty("loaded", loaded);
}

}  // namespace
}  // namespace mx::tok::tokenizer_test
