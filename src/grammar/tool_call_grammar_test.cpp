// The GLM tool-call grammar: what it accepts and refuses byte by byte, random calls that split
// into the markup's parts with arguments valid against the tool's schema (a splitter written
// here, independent of the grammar), malformed specs and limits. The server's tests run the
// same grammar through its tool-call parser end to end.
#include "grammar/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/constraint.h"
#include "grammar/grammar_test_util.h"
#include "grammar/schema_validator_test_util.h"

namespace mx::grammar::tool_call_test {
namespace {

using testing::Json;
using testing::Matches;
using testing::Share;

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},
                  "units":{"enum":["c","f"]},"when":{"type":"string","format":"date"},
                  "opts":{"$ref":"#/$defs/opts"}},
    "required":["city","days"],
    "$defs":{"opts":{"type":"object","properties":{"label":{"type":"string"}}}}}}},
  {"type":"function","function":{"name":"noop"}}])";

std::shared_ptr<const Grammar> Tools(const Json& name) {
  return Share(ToolCallGrammar({{"tools", Json::parse(kTools)}, {"name", name}}, {}, {}));
}

TEST(ToolCallGrammar, AcceptsTheTemplatesFormAndRefusesWhatWouldNotParse) {
  auto any = Tools(nullptr);
  ASSERT_NE(any, nullptr);
  const std::string call =
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>"
      "\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
  EXPECT_TRUE(Matches(any, call));
  EXPECT_TRUE(Matches(any, "\n" + call));
  EXPECT_TRUE(Matches(any, call + "\n<tool_call>noop\n</tool_call>"));  // more than one
  EXPECT_TRUE(Matches(any,
                      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>a b"
                      "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>7</arg_value>\n<arg_key>"
                      "units</arg_key>\n<arg_value>\"f\"</arg_value>\n<arg_key>when</arg_key>\n"
                      "<arg_value>2024-02-28</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>"
                      "{\"label\": \"\\u003cb>\"}</arg_value>\n</tool_call>"));
  const std::string refused[] = {
      "",                                      // no call
      "hello <tool_call>noop\n</tool_call>",   // text before
      "<tool_call>other\n</tool_call>",        // not a tool
      "<tool_call>get_weather\n</tool_call>",  // required missing
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>a<b</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",  // '<' in raw text
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>9</arg_value>\n</tool_call>",  // over maximum
      "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
      "<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n</tool_call>",  // out of order
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n"
      "<arg_value>{\"label\":\"<\"}</arg_value>\n</tool_call>",  // raw '<' in a JSON string
  };
  for (const std::string& s : refused) EXPECT_FALSE(Matches(any, s)) << s;
  auto single = Share(ToolCallGrammar(
      {{"tools", Json::parse(kTools)}, {"name", nullptr}, {"parallel", false}}, {}, {}));
  ASSERT_NE(single, nullptr);
  EXPECT_TRUE(Matches(single, call));
  EXPECT_FALSE(Matches(single, call + "\n<tool_call>noop\n</tool_call>"));
  auto named = Tools("noop");
  ASSERT_NE(named, nullptr);
  EXPECT_TRUE(Matches(named, "<tool_call>noop\n</tool_call>"));
  EXPECT_FALSE(Matches(named, "<tool_call>noop\n</tool_call>\n<tool_call>noop\n</tool_call>"));
  EXPECT_FALSE(Matches(named, call));
}

// Splits `<tool_call>NAME(\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>)*\n</tool_call>`.
bool Split(const std::string& s, std::string* name,
           std::vector<std::pair<std::string, std::string>>* args) {
  size_t p = s.starts_with("\n") ? 1 : 0;
  if (s.compare(p, 11, "<tool_call>") != 0) return false;
  p += 11;
  const size_t nl = s.find('\n', p);
  if (nl == std::string::npos) return false;
  *name = s.substr(p, nl - p);
  p = nl;
  while (s.compare(p, 10, "\n<arg_key>") == 0) {
    const size_t ke = s.find("</arg_key>\n<arg_value>", p);
    const size_t ve = s.find("</arg_value>", ke);
    if (ke == std::string::npos || ve == std::string::npos) return false;
    args->emplace_back(s.substr(p + 10, ke - p - 10), s.substr(ke + 22, ve - ke - 22));
    p = ve + 12;
  }
  return s.substr(p) == "\n</tool_call>";
}

// after_open: the rest of one call once the model has written <tool_call> (tool_choice auto),
// complete at its </tool_call>: nothing may follow.
TEST(ToolCallGrammar, AfterOpenIsTheRestOfOneCall) {
  auto rest = Share(ToolCallGrammar(
      {{"tools", Json::parse(kTools)}, {"name", nullptr}, {"after_open", true}}, {}, {}));
  ASSERT_NE(rest, nullptr);
  const std::string call =
      "get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>"
      "\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
  EXPECT_TRUE(Matches(rest, call));
  EXPECT_TRUE(Matches(rest, "noop\n</tool_call>"));
  EXPECT_TRUE(Matches(rest, "noop</tool_call>"));  // GLM-4.7 writes no newlines
  EXPECT_TRUE(Matches(rest,
                      "get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                      "<arg_key>days</arg_key>\n<arg_value>3</arg_value></tool_call>"));
  EXPECT_FALSE(Matches(rest, "noop\n\n</tool_call>"));
  EXPECT_FALSE(Matches(rest, "<tool_call>" + call));
  EXPECT_FALSE(Matches(rest, "\n" + call));
  EXPECT_FALSE(Matches(rest, "other\n</tool_call>"));
  EXPECT_FALSE(Matches(rest, call + "\n<tool_call>noop\n</tool_call>"));
  Matcher m(rest);
  ASSERT_TRUE(m.AcceptBytes(call));
  EXPECT_TRUE(m.Complete());
  EXPECT_TRUE(m.CanEnd());
}

TEST(ToolCallGrammar, RandomCallsSplitAndValidate) {
  auto g = Tools("get_weather");
  ASSERT_NE(g, nullptr);
  const Json tools = Json::parse(kTools);
  const Json& params = tools[0]["function"]["parameters"];
  std::mt19937_64 rng(3);
  int n = 0;
  for (int i = 0; i < 300; ++i) {
    auto s = testing::RandomWalk(g, rng, 600, 0.5, "<\"}", 0.3);
    if (!s) continue;
    ++n;
    std::string name;
    std::vector<std::pair<std::string, std::string>> args;
    ASSERT_TRUE(Split(*s, &name, &args)) << *s;
    EXPECT_EQ(name, "get_weather");
    Json obj = Json::object();
    for (const auto& [k, v] : args) {
      const Json& ps = params["properties"][k];
      if (ps.value("type", "") == "string") {
        obj[k] = v;  // raw text
      } else {
        obj[k] = Json::parse(v, nullptr, false);
        ASSERT_FALSE(obj[k].is_discarded()) << k << ": " << v;
      }
    }
    EXPECT_EQ(testing::SchemaValidator(params).Check(obj), "") << *s;
  }
  EXPECT_GT(n, 200);
}

TEST(ToolCallGrammar, MalformedSpecsAndLimitsAreErrors) {
  const std::pair<std::string, std::string> bad[] = {
      {"[]", "tools array"},
      {R"({"tools":[{"function":{}}]})", "name"},
      {R"({"tools":[{"type":"function","function":{"name":"f"}}],"name":"g"})", "no tool named"},
      {R"({"tools":[{"type":"function","function":{"name":"a<b"}}]})", "cannot be written"},
      {R"({"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]})",
       "must be an object"},
      {R"({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"x":{"type":"string","contentSchema":{}}}}}}]})",
       "contentSchema"},
      {R"({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "oneOf":[]}}}]})",
       "oneOf"},
      {R"({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"x":{"type":"string","pattern":"a<"}}}}}]})",
       "'<'"},
  };
  for (const auto& [text, want] : bad) {
    auto g = CompileConstraint({ConstraintKind::kToolCall, text, {}}, {}, {});
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find(want), std::string::npos) << g.status().ToString();
  }
  EXPECT_FALSE(CompileConstraint({ConstraintKind::kToolCall, "{not json", {}}, {}, {}).ok());
  GrammarLimits small;
  small.max_source_bytes = 64;
  auto big = CompileConstraint(
      {ConstraintKind::kToolCall, std::string(R"({"tools":[)") + kTools + "]}", {}}, {}, small);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  GrammarLimits shallow;
  shallow.max_repeat = 4;
  auto long_str = CompileConstraint({ConstraintKind::kToolCall,
                                     R"({"tools":[{"type":"function","function":{"name":"f",
        "parameters":{"properties":{"x":{"type":"string","maxLength":50}}}}}]})",
                                     {}},
                                    {}, shallow);
  ASSERT_FALSE(long_str.ok());
  EXPECT_EQ(long_str.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace mx::grammar::tool_call_test
