// Token masks over real and synthetic byte-level vocabularies: the cached mask equals a
// brute-force check of every token at every step of random walks; EOS is allowed exactly when
// the grammar can end; tokenizer encodings of valid documents are never masked out; decoding
// with random and adversarial (always-wrong) logits yields output that parses and validates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "grammar/constraint.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema_corpus_test_util.h"
#include "grammar/schema_validator_test_util.h"
#include "grammar/vocab_tokenizer.h"

namespace mx::grammar::token_mask_test {
namespace {

using testing::Json;
using testing::SchemaValidator;

const std::string kModelDir = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";

struct Bundled {
  tok::Tokenizer tokenizer;
  std::shared_ptr<const VocabIndex> vocab;
};

const Bundled& BundledVocab() {
  static const Bundled* b = [] {
    auto t = tok::Tokenizer::FromFile(kModelDir + "/tokenizer.json");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    std::ifstream in(kModelDir + "/generation_config.json");
    const Json gc = Json::parse(in);
    std::vector<int32_t> eos = gc["eos_token_id"].get<std::vector<int32_t>>();
    auto v = VocabFromTokenizer(*t, eos, t->vocab_size());
    return new Bundled{std::move(t).value(), v};
  }();
  return *b;
}

// A synthetic byte-level vocabulary: all 256 bytes, JSON punctuation runs that span several
// terminals (`",`, `"}`, `":"`, `},{"`), words with leading spaces, digits runs, and pieces
// of multi-byte characters (lead bytes alone, with one continuation, whole characters).
std::shared_ptr<const VocabIndex> SyntheticVocab(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  std::vector<std::string> toks;
  auto add = [&](std::string s) {
    if (!s.empty() && seen.insert(s).second) toks.push_back(std::move(s));
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  for (const char* p :
       {"\",",  "\"}",   "\":", "\":\"", "},{\"",    "\"]",      "],",           "{\"",
        "[{",   "}]",    ": ",  ", \"",  "true",     "false",    "null",         "\\n",
        "\\\"", "\\u00", "é",   "€",     "\xe2\x82", "\xf0\x9f", "\xf0\x9f\x98", "\x98\x80",
        "-0",   "00",    ".5e", "\"\"",  " }",       "\n  \""}) {
    add(p);
  }
  const std::string alpha = "abcdefghijklmnopqrstuvwxyz0123456789 \"{}[],:.-_\\\n";
  while (static_cast<int>(toks.size()) < n) {
    std::string s;
    const int len = 2 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) s.push_back(alpha[rng() % alpha.size()]);
    add(s);
  }
  const int32_t eos = static_cast<int32_t>(toks.size());
  toks.push_back("");        // EOS
  toks.push_back("<tool>");  // a special token: never allowed
  return std::make_shared<const VocabIndex>(toks, std::vector<int32_t>{eos},
                                            std::vector<int32_t>{eos + 1});
}

// Every token checked against the byte matcher directly.
TokenBitmask BruteForce(const VocabIndex& v, Matcher& m, const std::set<int32_t>& never) {
  TokenBitmask mask;
  mask.Reset(v.size());
  for (int32_t id = 0; id < v.size(); ++id) {
    if (v.IsEos(id)) {
      if (m.CanEnd()) mask.Set(id);
    } else if (!never.contains(id) && !v.bytes(id).empty() && m.CanAccept(v.bytes(id))) {
      mask.Set(id);
    }
  }
  return mask;
}

std::vector<ConstraintSpec> Specs(int n_random) {
  std::vector<ConstraintSpec> specs;
  for (const std::string& s : testing::HandWrittenSchemas()) {
    specs.push_back({ConstraintKind::kJsonSchema, s, {}});
  }
  testing::SchemaGenerator gen(7);
  for (int i = 0; i < n_random; ++i)
    specs.push_back({ConstraintKind::kJsonSchema, gen.Next().dump(), {}});
  specs.push_back({ConstraintKind::kJsonObject, "", {}});
  specs.push_back({ConstraintKind::kRegex, R"(\d{1,3}(\.\d+)? (apples|pears)[.!]?)", {}});
  specs.push_back({ConstraintKind::kRegex, "[^\"]{0,4}é+", {}});
  specs.push_back({ConstraintKind::kChoice, "", {"positive", "negative", "neutral", "né"}});
  specs.push_back({ConstraintKind::kEbnf,
                   "root ::= item (\", \" item)*\nitem ::= [a-z]+ \"=\" [0-9]{1,3}",
                   {}});
  return specs;
}

// Random token walks: at every step the cached mask must equal the brute-force mask, and a
// rollback must give back the same mask.
void CheckMasks(const std::shared_ptr<const VocabIndex>& vocab,
                const std::vector<ConstraintSpec>& specs, int walks, uint64_t seed,
                const std::set<int32_t>& never, MaskCacheOptions masks = {}) {
  std::mt19937_64 rng(seed);
  GrammarCacheOptions opt;
  opt.masks = masks;
  GrammarCache cache(vocab, opt);
  int64_t steps = 0;
  for (const ConstraintSpec& spec : specs) {
    auto cg = cache.Get(spec);
    ASSERT_TRUE(cg.ok()) << spec.text << ": " << cg.status().ToString();
    for (int w = 0; w < walks; ++w) {
      TokenMatcher tm(*cg);
      Matcher ref((*cg)->grammar());
      for (int step = 0; step < 40; ++step) {
        TokenBitmask got;
        tm.FillMask(&got);
        const TokenBitmask want = BruteForce(*vocab, ref, never);
        ASSERT_EQ(got.words(), want.words()) << spec.text << " step " << step;
        ++steps;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->size(); ++id) {
          if (got.Test(id)) allowed.push_back(id);
        }
        ASSERT_FALSE(allowed.empty()) << spec.text;  // never a dead end
        const int32_t pick = allowed[rng() % allowed.size()];
        if (vocab->IsEos(pick)) {
          ASSERT_TRUE(tm.AcceptToken(pick));
          EXPECT_TRUE(tm.Terminated());
          break;
        }
        ASSERT_TRUE(tm.AcceptToken(pick));
        ASSERT_TRUE(ref.AcceptBytes(vocab->bytes(pick)));
        if (step % 7 == 3) {  // speculative rollback
          tm.Rollback(1);
          TokenBitmask again;
          tm.FillMask(&again);
          ASSERT_TRUE(again.Test(pick));
          ASSERT_TRUE(tm.AcceptToken(pick));
        }
      }
    }
  }
  EXPECT_GT(steps, static_cast<int64_t>(specs.size()) * walks * 3);
}

// ApplyTokenMask against its definition (a logit stays iff its bit is set; logits past the
// mask's words are refused), on masks mixing all-zero, all-one and mixed words, for vocabulary
// sizes on and off a word boundary and logits longer than the mask.
TEST(TokenMask, ApplyKeepsExactlyTheAllowedLogits) {
  std::mt19937_64 rng(11);
  for (int32_t n : {1, 63, 64, 65, 2048, 2049, 5000}) {
    for (int32_t extra : {0, 70}) {
      TokenBitmask m;
      m.Reset(n);
      for (int32_t wi = 0; wi * 64 < n; ++wi) {
        const int kind = static_cast<int>(rng() % 3);  // 0: none, 1: all, 2: random
        for (int32_t id = wi * 64; id < std::min(n, wi * 64 + 64); ++id) {
          if (kind == 1 || (kind == 2 && (rng() & 1))) m.Set(id);
        }
      }
      std::vector<float> logits(static_cast<size_t>(n + extra));
      for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.5f - 7.0f;
      const std::vector<float> before = logits;
      ApplyTokenMask(m, logits);
      for (size_t i = 0; i < logits.size(); ++i) {
        const bool keep = static_cast<int32_t>(i) < n && m.Test(static_cast<int32_t>(i));
        if (keep) {
          ASSERT_EQ(logits[i], before[i]) << "n " << n << " id " << i;
        } else {
          ASSERT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << "n " << n << " id " << i;
        }
      }
    }
  }
}

TEST(TokenMask, EqualsBruteForceOnTheBundledVocabulary) {
  std::set<int32_t> added;
  for (const auto& a : BundledVocab().tokenizer.added_tokens()) added.insert(a.id);
  CheckMasks(BundledVocab().vocab, Specs(40), 3, 1, added);
}

TEST(TokenMask, EqualsBruteForceOnASyntheticCrossTerminalVocabulary) {
  auto v = SyntheticVocab(3000, 5);
  CheckMasks(v, Specs(5), 2, 2, {v->size() - 1});
}

// The cache keyed by the top's rule alone (every token that leaves it checked per step), by
// one frame, and with a full cache (masks computed each time, not kept) give the same masks.
TEST(TokenMask, EqualsBruteForceWithEveryCacheDepthAndAFullCache) {
  auto v = SyntheticVocab(3000, 6);
  for (int32_t frames : {0, 1, 3}) {
    SCOPED_TRACE(frames);
    MaskCacheOptions m;
    m.frames = frames;
    CheckMasks(v, Specs(4), 2, 3 + frames, {v->size() - 1}, m);
  }
  MaskCacheOptions full;
  full.max_entries = 2;
  CheckMasks(v, Specs(4), 1, 9, {v->size() - 1}, full);
}

// Keys computed each by a whole walk (nothing shared between grammars) give the brute-force
// masks too; the default path is checked above.
TEST(TokenMask, EqualsBruteForceWithoutRefinementOrSharing) {
  auto v = SyntheticVocab(3000, 7);
  MaskCacheOptions plain;
  plain.refine = false;
  plain.share = false;
  CheckMasks(v, Specs(4), 2, 11, {v->size() - 1}, plain);
}

// Random schemas over one vocabulary: the states they have in common (inside a string, a
// number) come from the vocabulary's shared masks, and every mask still equals brute force,
// with refinement and sharing, and with each alone.
TEST(TokenMask, MasksSharedAcrossSchemasEqualBruteForce) {
  std::vector<ConstraintSpec> specs;
  testing::SchemaGenerator gen(17);
  for (int i = 0; i < 12; ++i)
    specs.push_back({ConstraintKind::kJsonSchema, gen.Next().dump(), {}});
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode);
    auto v = SyntheticVocab(3000, 8 + mode);
    MaskCacheOptions m;
    m.refine = mode != 1;  // modes: both, sharing alone, refinement alone
    m.share = mode != 2;
    CheckMasks(v, specs, 2, 21 + mode, {v->size() - 1}, m);
    if (m.share) {
      EXPECT_GT(v->shared_masks().size(), 0);
      EXPECT_GT(v->shared_masks().hits(), 0);  // later schemas reuse earlier ones' masks
    } else {
      EXPECT_EQ(v->shared_masks().size(), 0);
    }
  }
}

// The shared masks stay within their byte bound (and masks stay exact past it).
TEST(TokenMask, SharedMasksStayWithinTheirBound) {
  auto v = SyntheticVocab(3000, 12);
  std::vector<ConstraintSpec> specs;
  testing::SchemaGenerator gen(19);
  for (int i = 0; i < 6; ++i) specs.push_back({ConstraintKind::kJsonSchema, gen.Next().dump(), {}});
  MaskCacheOptions m;
  m.shared_max_bytes = 64 << 10;
  CheckMasks(v, specs, 2, 31, {v->size() - 1}, m);
  EXPECT_GT(v->shared_masks().size(), 0);
  EXPECT_LE(v->shared_masks().bytes(), 64 << 10);
}

// Many distinct schemas through one cache with small bounds (the --grammar-cache-size and
// --grammar-mask-cache-entries flags): every compiled grammar keeps at most its cap of masks,
// and the masks past it stay exact (CheckMasks compares each with brute force).
TEST(TokenMask, MaskCacheStaysWithinItsCapUnderManySchemas) {
  auto v = SyntheticVocab(3000, 13);
  GrammarCacheOptions opt;
  opt.masks.max_entries = 6;
  opt.capacity = 4;
  GrammarCache cache(v, opt);
  testing::SchemaGenerator gen(23);
  std::mt19937_64 rng(5);
  std::set<std::string> distinct;
  for (int i = 0; i < 30; ++i) {
    const std::string schema = gen.Next().dump();
    distinct.insert(schema);
    auto cg = cache.Get({ConstraintKind::kJsonSchema, schema, {}});
    ASSERT_TRUE(cg.ok());
    TokenMatcher tm(*cg);
    for (int step = 0; step < 30 && !tm.Terminated(); ++step) {
      TokenBitmask mask;
      tm.FillMask(&mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v->size(); ++id) {
        if (mask.Test(id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(tm.AcceptToken(allowed[rng() % allowed.size()]));
    }
    EXPECT_LE((*cg)->cached(), 6);
  }
  EXPECT_GT(distinct.size(), 20u);
  EXPECT_GE(cache.misses(), static_cast<int64_t>(distinct.size()));  // capacity 4: recompiled
  MaskCacheOptions small;
  small.max_entries = 3;
  CheckMasks(v, Specs(2), 1, 41, {v->size() - 1}, small);
}

TEST(TokenMask, EosOnlyWhenTheGrammarCanEndAndSpecialTokensNever) {
  const Bundled& b = BundledVocab();
  GrammarCache cache(b.vocab);
  auto cg = cache.Get({ConstraintKind::kRegex, "[0-9]{1,2}", {}});
  ASSERT_TRUE(cg.ok());
  TokenMatcher tm(*cg);
  TokenBitmask m;
  tm.FillMask(&m);
  for (int32_t e : b.vocab->eos_ids()) EXPECT_FALSE(m.Test(e));
  for (const auto& a : b.tokenizer.added_tokens()) EXPECT_FALSE(m.Test(a.id)) << a.content;
  const auto seven = b.tokenizer.Encode("7");
  ASSERT_EQ(seven.size(), 1u);
  ASSERT_TRUE(tm.AcceptToken(seven[0]));
  tm.FillMask(&m);
  for (int32_t e : b.vocab->eos_ids()) EXPECT_TRUE(m.Test(e));
  ASSERT_TRUE(tm.AcceptToken(seven[0]));
  EXPECT_TRUE(tm.Complete());
  tm.FillMask(&m);
  EXPECT_EQ(m.Count(), static_cast<int64_t>(b.vocab->eos_ids().size()));  // only EOS is left
  EXPECT_FALSE(tm.AcceptToken(seven[0]));
  EXPECT_TRUE(tm.AcceptToken(b.vocab->eos_ids()[0]));
  EXPECT_TRUE(tm.Terminated());
  tm.FillMask(&m);
  EXPECT_EQ(m.Count(), 0);
}

TEST(TokenMask, TokenizerEncodingsOfValidDocumentsAreAllowed) {
  const Bundled& b = BundledVocab();
  GrammarCache cache(b.vocab);
  std::mt19937_64 rng(9);
  int docs = 0;
  for (const std::string& s : testing::HandWrittenSchemas()) {
    auto cg = cache.Get({ConstraintKind::kJsonSchema, s, {}});
    ASSERT_TRUE(cg.ok());
    for (int w = 0; w < 4; ++w) {
      auto doc = testing::RandomWalk((*cg)->grammar(), rng, 400, 0.5, "\"]}", 0.35);
      if (!doc) continue;
      ++docs;
      // The tokenizer splits the text its own way (BPE merges across terminals).
      const std::vector<int32_t> ids = b.tokenizer.Encode(*doc, /*allow_special=*/false);
      TokenMatcher tm(*cg);
      TokenBitmask m;
      for (int32_t id : ids) {
        tm.FillMask(&m);
        ASSERT_TRUE(m.Test(id)) << s << ": '" << *doc << "' token " << id;
        ASSERT_TRUE(tm.AcceptToken(id));
      }
      tm.FillMask(&m);
      EXPECT_TRUE(m.Test(b.vocab->eos_ids()[0])) << *doc;
    }
  }
  EXPECT_GT(docs, 100);
}

// Decoding as an engine would: logits, the mask applied, a draw. Random logits, and
// adversarial ones that put every disallowed token far above the allowed ones. A small bonus
// on closing bytes and EOS keeps walks short.
std::optional<std::string> Decode(const std::shared_ptr<const CompiledGrammar>& cg,
                                  bool adversarial, std::mt19937_64& rng) {
  const VocabIndex& v = cg->vocab();
  TokenMatcher tm(cg);
  TokenBitmask m;
  std::vector<float> logits(static_cast<size_t>(v.size()));
  std::normal_distribution<float> nd(0, 1);
  std::string out;
  for (int step = 0; step < 400; ++step) {
    tm.FillMask(&m);
    for (int32_t id = 0; id < v.size(); ++id) {
      float x = nd(rng);
      const std::string& bytes = v.bytes(id);
      if (v.IsEos(id) || bytes.find_first_of("\"]}") != std::string::npos) x += 2.5f;
      if (adversarial && !m.Test(id)) x += 50.0f;
      logits[id] = x;
    }
    ApplyTokenMask(m, logits);
    // Softmax draw over what is left (greedy when adversarial: the best of the allowed).
    int32_t pick = -1;
    if (adversarial) {
      pick = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      double total = 0;
      for (float x : logits) total += std::isinf(x) ? 0.0 : std::exp(static_cast<double>(x));
      double r = std::uniform_real_distribution<double>(0, total)(rng);
      for (int32_t id = 0; id < v.size() && pick < 0; ++id) {
        if (std::isinf(logits[id])) continue;
        r -= std::exp(static_cast<double>(logits[id]));
        if (r <= 0) pick = id;
      }
      if (pick < 0)
        pick =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    EXPECT_FALSE(std::isinf(logits[pick]));
    if (!tm.AcceptToken(pick)) {
      ADD_FAILURE() << "an allowed token was refused: " << pick << " after '" << out << "'";
      return std::nullopt;
    }
    if (tm.Terminated()) return out;
    out += v.bytes(pick);
  }
  return std::nullopt;
}

TEST(TokenMask, RandomAndAdversarialLogitsGiveValidDocuments) {
  const Bundled& b = BundledVocab();
  GrammarCache cache(b.vocab);
  std::mt19937_64 rng(21);
  testing::SchemaGenerator gen(31);
  std::vector<std::string> corpus = testing::HandWrittenSchemas();
  for (int i = 0; i < 160; ++i) corpus.push_back(gen.Next().dump());
  int finished = 0, runs = 0;
  for (const std::string& s : corpus) {
    auto cg = cache.Get({ConstraintKind::kJsonSchema, s, {}});
    ASSERT_TRUE(cg.ok()) << s;
    const Json schema = Json::parse(s);
    const SchemaValidator val(schema);
    for (bool adversarial : {false, true}) {
      ++runs;
      auto out = Decode(*cg, adversarial, rng);
      if (!out) {
        if (getenv("MX_DEBUG_GRAMMAR"))
          fprintf(stderr, "unfinished %d: %s\n", adversarial, s.c_str());
        continue;
      }
      ++finished;
      const Json doc = Json::parse(*out, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << s << " gave " << *out;
      EXPECT_EQ(val.Check(doc), "") << s << " gave " << *out;
    }
  }
  EXPECT_GT(finished, runs * 2 / 3);
  EXPECT_EQ(cache.misses(),
            static_cast<int64_t>(std::set<std::string>(corpus.begin(), corpus.end()).size()));
}

TEST(TokenMask, CacheSharesCompiledGrammarsAndReportsErrors) {
  GrammarCache cache(BundledVocab().vocab, {.capacity = 2});
  auto a = cache.Get({ConstraintKind::kRegex, "a+", {}});
  auto a2 = cache.Get({ConstraintKind::kRegex, "a+", {}});
  ASSERT_TRUE(a.ok() && a2.ok());
  EXPECT_EQ(a->get(), a2->get());
  EXPECT_EQ(cache.hits(), 1);
  auto bad = cache.Get({ConstraintKind::kJsonSchema, R"({"type":"object","not":{}})", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'not'"), std::string::npos);
  (void)cache.Get({ConstraintKind::kRegex, "b+", {}});
  (void)cache.Get({ConstraintKind::kRegex, "c+", {}});
  auto a3 = cache.Get({ConstraintKind::kRegex, "a+", {}});  // evicted: compiled again
  ASSERT_TRUE(a3.ok());
  EXPECT_NE(a->get(), a3->get());
}

}  // namespace
}  // namespace mx::grammar::token_mask_test
