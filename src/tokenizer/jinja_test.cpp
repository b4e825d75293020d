// Unit tests for the Jinja engine's value layer and renderer entry points. Behaviour is
// pinned end to end by the goldens in chat_template_test.cpp; these cover the Python
// formatting rules directly (expected strings come from CPython 3.11).
#include "tokenizer/jinja.h"

#include <gtest/gtest.h>

#include "tokenizer/jinja_unicode.h"
#include "tokenizer/jinja_value.h"

namespace mx::jinja {
namespace {

std::string FloatRepr(double d) {
  std::string s;
  AppendFloatRepr(d, &s);
  return s;
}

TEST(JinjaValue, FloatReprMatchesPython) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(FloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(FloatRepr(1.5e-5), "1.5e-05");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(123456789.125), "123456789.125");
  EXPECT_EQ(FloatRepr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(FloatRepr(5e-324), "5e-324");
  EXPECT_EQ(FloatRepr(1.0 / 0.0), "inf");
}

TEST(JinjaValue, ReprOfContainersAndStrings) {
  List l = {Value("it's"), Value("a\"b"),      Value("x'y\"z"), Value::None(),
            Value(true),   Value(int64_t{-3}), Value(2.5)};
  EXPECT_EQ(PyRepr(Value::MakeList(l)), R"(["it's", 'a"b', 'x\'y"z', None, True, -3, 2.5])");
  EXPECT_EQ(PyRepr(Value::MakeList({Value(1)}, true)), "(1,)");
  EXPECT_EQ(PyRepr(Value("tab\t\x01\xc2\xa0\xc3\xa9")), R"('tab\t\x01\xa0é')");
  Dict d;
  d.Set(Value("k"), Value::MakeList({}));
  EXPECT_EQ(PyStr(Value::MakeDict(d)), "{'k': []}");
  EXPECT_EQ(PyStr(Value()), "");
}

TEST(JinjaValue, JsonDumpsMatchesPython) {
  Dict d;
  d.Set(Value("b"), Value::MakeList({Value(1), Value(2.0), Value::None()}));
  d.Set(Value("a"), Value("\xc3\xbc\xf0\x9f\x99\x82\n\""));
  Value v = Value::MakeDict(d);
  JsonDumpOptions o;
  EXPECT_EQ(PyJsonDumps(v, o).value(),
            "{\"b\": [1, 2.0, null], \"a\": \"\xc3\xbc\xf0\x9f\x99\x82\\n\\\"\"}");
  o.ensure_ascii = true;
  EXPECT_EQ(PyJsonDumps(v, o).value(), R"({"b": [1, 2.0, null], "a": "\u00fc\ud83d\ude42\n\""})");
  o.sort_keys = true;
  o.indent = "  ";
  EXPECT_EQ(PyJsonDumps(v, o).value(),
            "{\n  \"a\": \"\\u00fc\\ud83d\\ude42\\n\\\"\",\n  \"b\": [\n    1,\n    2.0,\n    "
            "null\n  ]\n}");
  EXPECT_FALSE(PyJsonDumps(Value(), JsonDumpOptions{}).ok());  // Undefined
}

TEST(JinjaUnicode, CaseMappingAndLength) {
  EXPECT_EQ(PyUpper("stra\xc3\x9f"
                    "e"),
            "STRASSE");
  EXPECT_EQ(PyLower("\xc3\x89"
                    "COLE"),
            "\xc3\xa9"
            "cole");
  EXPECT_EQ(PyTitle("they're bill's"), "They'Re Bill'S");
  EXPECT_EQ(Utf8Length("h\xc3\xa9\xf0\x9f\x99\x82"), 3u);
  EXPECT_EQ(Utf8Length("\xff\xfe"), 2u);  // invalid bytes count as one each
}

TEST(Jinja, RenderWithGlobals) {
  auto t = Parse("{% for x in xs %}{{ loop.index }}{{ x }}{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Dict g;
  g.Set(Value("xs"), Value::MakeList({Value("a"), Value("b")}));
  auto out = Render(**t, g);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "1a2b");
}

TEST(Jinja, TemplateIsReusableAndIndependentAcrossRenders) {
  auto t = Parse(
      "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}"
      "{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  for (int i = 1; i <= 3; ++i) {
    Dict g;
    g.Set(Value("xs"), Value::MakeList({Value(i), Value(i)}));
    auto out = Render(**t, g);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(*out, std::to_string(2 * i));
  }
}

}  // namespace
}  // namespace mx::jinja
