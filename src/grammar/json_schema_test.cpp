// JSON Schema -> grammar: a corpus of hand-written and random schemas whose random outputs
// must parse and validate with an independent validator (schema_validator_test_util.h);
// exact integer ranges; documents that must be accepted or refused; errors that name the
// unsupported keyword.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_corpus_test_util.h"
#include "grammar/schema_validator_test_util.h"

namespace mx::grammar::json_schema_test {
namespace {

using testing::Json;
using testing::Matches;
using testing::RandomWalk;
using testing::SchemaValidator;
using testing::Share;

std::shared_ptr<const Grammar> Compile(const std::string& schema) {
  auto g = JsonSchemaGrammar(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  return Share(std::move(g));
}

struct WalkStats {
  int finished = 0;
  std::set<std::string> distinct;
};

// Random outputs of `schema` must parse as JSON and validate.
void CheckWalks(const std::string& schema, std::mt19937_64& rng, int walks, WalkStats* st) {
  auto g = Compile(schema);
  ASSERT_NE(g, nullptr);
  const Json s = Json::parse(schema);
  const SchemaValidator v(s);
  for (int w = 0; w < walks; ++w) {
    auto out = RandomWalk(g, rng, 3000, 0.5, "\"]}", 0.35);
    if (!out) continue;
    ++st->finished;
    st->distinct.insert(*out);
    const Json doc = Json::parse(*out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded()) << schema << "\nproduced invalid JSON: " << *out;
    EXPECT_EQ(v.Check(doc), "") << schema << "\nproduced " << *out;
  }
}

TEST(JsonSchema, HandWrittenCorpusOutputsValidate) {
  std::mt19937_64 rng(11);
  WalkStats st;
  const auto corpus = testing::HandWrittenSchemas();
  for (const std::string& s : corpus) CheckWalks(s, rng, 25, &st);
  EXPECT_GT(st.finished, static_cast<int>(corpus.size()) * 20);
  EXPECT_GT(st.distinct.size(), st.finished / 2u);  // diverse, not one path
}

TEST(JsonSchema, RandomCorpusOutputsValidate) {
  std::mt19937_64 rng(12);
  testing::SchemaGenerator gen(99);
  WalkStats st;
  for (int i = 0; i < 200; ++i) CheckWalks(gen.Next().dump(), rng, 12, &st);
  EXPECT_GT(st.finished, 200 * 9);
  EXPECT_GT(st.distinct.size(), st.finished / 2u);
}

TEST(JsonSchema, IntegerRangesAreExact) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    std::optional<int64_t> lo, hi;
    const int64_t scale = trial < 20 ? 30 : trial < 40 ? 3000 : 300000;
    if (trial % 4 != 1) lo = static_cast<int64_t>(rng() % (2 * scale)) - scale;
    if (trial % 4 != 2) hi = (lo ? *lo : -scale) + static_cast<int64_t>(rng() % (2 * scale));
    Json s = {{"type", "integer"}};
    if (lo) s["minimum"] = *lo;
    if (hi) s["maximum"] = *hi;
    auto g = Compile(s.dump());
    ASSERT_NE(g, nullptr);
    const int64_t from = (lo ? *lo : (hi ? *hi : 0) - 2 * scale) - 40;
    const int64_t to = (hi ? *hi : (lo ? *lo : 0) + 2 * scale) + 40;
    const int64_t step = std::max<int64_t>(1, (to - from) / 4000);
    for (int64_t v = from; v <= to; v += step) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(Matches(g, std::to_string(v)), in) << s.dump() << " on " << v;
    }
    EXPECT_FALSE(Matches(g, "-0"));
    EXPECT_FALSE(Matches(g, "01"));
  }
}

TEST(JsonSchema, AcceptsAndRefusesDocuments) {
  struct Case {
    const char* schema;
    std::vector<const char*> good, bad;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]})",
       {R"({"answer":42})", R"({ "answer" : -7 })", "{\n  \"answer\": 0\n}"},
       {R"({})", R"({"answer":"42"})", R"({"answer":4.5})", R"({"answer":1,"x":2})",
        R"({"answer":01})"}},
      {R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}})",
       {"{}", R"({"a":"x"})", R"({"b":1})", R"({"a":"\u00e9\n","b":2})"},
       {R"({"b":1,"a":"x"})", R"({"a":"x",})", R"({,"b":1})", R"({"a":"\ud800"})"}},
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-28")", R"("1999-12-31")"},
       {R"("2023-02-30")", R"("2023-13-01")", R"("2023-04-31")", R"("20230101")"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("a\"c")", R"("€€€")"},
       {R"("a")", R"("abcd")", R"("a\qb")"}},
      {R"({"type":"number","minimum":-2.5,"maximum":3.75})",
       {"-2", "3", "0.25", "-1.999", "2.5"},
       {"-3", "4", "1e2", "3.8"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})",
       {"[1]", "[1, 2]", "[ 3 ,4 ]"},
       {"[]", "[1,2,3]", "[1,]", "[\"1\"]"}},
      {R"({"enum":["a",1,null,[true]]})",
       {R"("a")", "1", "null", "[true]"},
       {R"("b")", "[ true]", "true"}},
      {R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"})",
       {R"({"c":[{"c":[{},{"c":[]}]}]})"},
       {R"({"c":[{"d":1}]})"}},
  };
  for (const Case& c : cases) {
    auto g = Compile(c.schema);
    ASSERT_NE(g, nullptr);
    for (const char* d : c.good) EXPECT_TRUE(Matches(g, d)) << c.schema << " should accept " << d;
    for (const char* d : c.bad) EXPECT_FALSE(Matches(g, d)) << c.schema << " should refuse " << d;
  }
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  auto g = Share(JsonObjectGrammar());
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"a":[1,2.5e-3,{"b":null}],"c":"\u20ac","d":true})"));
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, R"({"a":})"));
  EXPECT_FALSE(Matches(g, R"({"a":1} )"));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50; ++i) {
    auto out = RandomWalk(g, rng, 3000, 0.5, "\"]}", 0.4);
    if (!out) continue;
    const Json doc = Json::parse(*out, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << *out;
  }
}

TEST(JsonSchema, UnsupportedAndMalformedSchemasAreNamedErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties'"},
      {R"({"type":"string","contentSchema":{},"if":{}})", "'contentSchema', 'if'"},
      {R"({"type":"array","prefixItems":[{}]})", "'prefixItems'"},
      {R"({"type":"object","properties":{"a":{"not":{}}}})", "#/properties/a"},
      {R"({"type":"string","format":"hostname"})", "format 'hostname'"},
      {R"({"$ref":"http://example.com/s.json"})", "not in this document"},
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"enum":[]})", "non-empty"},
      {R"(false)", "nothing matches"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "within the bounds"},
      {R"({"type":"string","maxLength":1000000000})", "over the limit"},
      {R"({"type":"string","pattern":"(a"})", "regex"},
      {R"({"type":"object","properties":{"a":{}},"additionalProperties":true})",
       "additionalProperties"},
      {R"({"type":"object","required":["a"]})", "required property 'a'"},
      {R"({"allOf":[{},{}]})", "allOf"},
      {R"({"anyOf":[{}],"type":"string"})", "together"},
      {R"({"type":"integer","minimum":1e300})", "not supported"},
      {R"({"type":)", "not valid JSON"},
      {"[" + std::string(300, '[') + std::string(301, ']'), "deeper"},
      {R"(42)", "object or a boolean"},
  };
  for (const auto& [schema, want] : cases) {
    auto g = JsonSchemaGrammar(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(want), std::string::npos)
        << schema << ": " << g.status().message();
  }
  // Deep but legal nesting past the depth limit is refused, not recursed into.
  std::string deep = "{\"type\":\"array\",\"items\":";
  std::string s;
  for (int i = 0; i < 100; ++i) s += deep;
  s += "{}";
  for (int i = 0; i < 100; ++i) s += "}";
  auto g = JsonSchemaGrammar(s);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace mx::grammar::json_schema_test
