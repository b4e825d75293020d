// GLM tool calls that survive streaming: a property test over generated outputs (several calls,
// zero-argument calls, values with '<', '&', newlines, multi-byte UTF-8 and JSON values,
// undeclared names, broken markup) cut at every byte boundary and fed a byte at a time, each
// against the calls and text the generator meant; values typed by the tool's schema; a
// <tool_call> inside an unfinished <think> ends the reasoning.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/reasoning_parser.h"

namespace mx::server::tool_call_parser_test {
namespace {

using Json = nlohmann::ordered_json;

Json Tools() {
  return Json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"days":{"type":"integer"},"zip":{"type":"string"},
      "metric":{"type":"boolean"},"ratio":{"type":"number"},"tags":{"type":"array"},
      "where":{"type":"object"},"note":{"type":["string","null"]}}}}},
    {"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}},
    {"type":"function","function":{"name":"run_code","parameters":{"type":"object",
      "properties":{"code":{"type":"string"},"timeout":{"anyOf":[{"type":"integer"},
      {"type":"null"}]}}}}}])");
}

struct Parsed {
  std::string content;
  std::vector<ParsedToolCall> calls;
  int unknown = 0;
  int malformed = 0;
  bool operator==(const Parsed& o) const {
    if (content != o.content || unknown != o.unknown || malformed != o.malformed) return false;
    if (calls.size() != o.calls.size()) return false;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].name != o.calls[i].name || calls[i].arguments != o.calls[i].arguments) {
        return false;
      }
    }
    return true;
  }
};

std::ostream& operator<<(std::ostream& os, const Parsed& p) {
  os << "content=" << Json(p.content).dump() << " unknown=" << p.unknown
     << " malformed=" << p.malformed << " calls=[";
  for (const auto& c : p.calls) os << c.name << c.arguments << ";";
  return os << "]";
}

void Add(Parsed* p, ToolCallParser::Out o) {
  p->content += o.content;
  p->calls.insert(p->calls.end(), o.calls.begin(), o.calls.end());
  p->unknown += o.unknown_tools;
  p->malformed += o.malformed;
}

Parsed ParsePieces(const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallParser parser(Tools());
  Parsed p;
  size_t from = 0;
  for (size_t cut : cuts) {
    Add(&p, parser.Push(std::string_view(text).substr(from, cut - from)));
    from = cut;
  }
  Add(&p, parser.Push(std::string_view(text).substr(from)));
  Add(&p, parser.Finish());
  return p;
}

// One generated output and what parsing it must give.
struct Case {
  std::string text;
  Parsed want;
};

// Text that is never tool-call markup: '<', '&', newlines, multi-byte UTF-8, partial tags.
std::string RandomText(std::mt19937& rng) {
  static const char* kPieces[] = {
      "Let me check", " a < b && c > d", "\n", "Zürich ", "東京",  "🚀",
      "<tool",        "<tool_cal",       "x",  " ",       "&amp;", "</arg_value>",
      "<think>"};
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) s += kPieces[rng() % std::size(kPieces)];
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) s += "x";
  return s;
}

// Optional whitespace between the parts of a call (GLM-4.5 writes newlines, GLM-4.7 none).
std::string Gap(std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return "\n";
    case 1:
      return " ";
    default:
      return "";
  }
}

// A declared call with random arguments: (markup, the call it parses to).
std::pair<std::string, ParsedToolCall> RandomCall(std::mt19937& rng) {
  Json args = Json::object();
  std::string name;
  std::string body;
  auto arg = [&](const std::string& key, const std::string& written, Json value) {
    body += Gap(rng) + "<arg_key>" + key + "</arg_key>" + Gap(rng) + "<arg_value>" + written +
            "</arg_value>";
    args[key] = std::move(value);
  };
  switch (rng() % 3) {
    case 0: {
      name = "get_weather";
      if (rng() % 2)
        arg("city", "São Paulo <b> & \"x\"\nline 2 🚀", "São Paulo <b> & \"x\"\nline 2 🚀");
      if (rng() % 2) arg("days", "3", 3);
      if (rng() % 2) arg("zip", "075001", "075001");  // a string by schema, digits or not
      if (rng() % 2) arg("metric", rng() % 2 ? "true" : "True", true);
      if (rng() % 2) arg("ratio", "0.25", 0.25);
      if (rng() % 2) arg("tags", R"(["a<b", "ü", 1])", Json::parse(R"(["a<b", "ü", 1])"));
      if (rng() % 2) {
        arg("where", R"({"lat": 1.5, "n": {"k": [true, null]}})",
            Json::parse(R"({"lat": 1.5, "n": {"k": [true, null]}})"));
      }
      if (rng() % 2) arg("note", "null", nullptr);
      break;
    }
    case 1:
      name = "now";  // zero arguments
      break;
    default:
      name = "run_code";
      if (rng() % 2) arg("code", "if a < b:\n    print('&')\n", "if a < b:\n    print('&')\n");
      if (rng() % 2) arg("timeout", "30", 30);
      break;
  }
  std::string markup = "<tool_call>" + name + body + Gap(rng) + "</tool_call>";
  return {markup, ParsedToolCall{name, Dump(args)}};
}

Case Generate(std::mt19937& rng) {
  Case c;
  bool after_call = false;
  const int parts = 1 + static_cast<int>(rng() % 5);
  for (int i = 0; i < parts; ++i) {
    const unsigned kind = rng() % 8;
    if (kind < 3) {
      const std::string t = RandomText(rng);
      c.text += t;
      c.want.content += t;
      after_call = false;
    } else if (kind < 6) {
      if (after_call && rng() % 2) c.text += "\n";  // dropped between calls
      auto [markup, call] = RandomCall(rng);
      c.text += markup;
      c.want.calls.push_back(call);
      after_call = true;
    } else if (kind == 6) {
      // A name nobody declared: the markup is text, counted.
      const std::string m =
          "<tool_call>rm_rf<arg_key>path</arg_key><arg_value>/</arg_value>"
          "</tool_call>";
      c.text += m;
      c.want.content += m;
      c.want.unknown += 1;
      after_call = false;
    } else {
      // A key without <arg_value> (the model's own mistake): text, counted.
      const std::string m =
          "<tool_call>get_weather<arg_key>city</arg_key>Paris</arg_value>"
          "</tool_call>";
      c.text += m;
      c.want.content += m;
      c.want.malformed += 1;
      after_call = false;
    }
  }
  if (after_call && rng() % 2) c.text += "\n";  // trailing whitespace after a call is dropped
  if (rng() % 6 == 0) {
    // A call left open at the end of the output: text, counted.
    const std::string m = "<tool_call>get_weather<arg_key>ci";
    c.text += m;
    c.want.content += m;
    c.want.malformed += 1;
  }
  return c;
}

TEST(ToolCallParser, SameCallsAndTextForEveryByteBoundary) {
  std::mt19937 rng(20261206);
  for (int iter = 0; iter < 300; ++iter) {
    const Case c = Generate(rng);
    ASSERT_EQ(ParsePieces(c.text, {}), c.want) << Json(c.text).dump();
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ASSERT_EQ(ParsePieces(c.text, {cut}), c.want) << Json(c.text).dump() << " cut " << cut;
    }
    std::vector<size_t> every(c.text.size());
    for (size_t i = 0; i < every.size(); ++i) every[i] = i;
    ASSERT_EQ(ParsePieces(c.text, every), c.want) << Json(c.text).dump();
    std::vector<size_t> random_cuts;
    for (size_t i = 0; i < c.text.size(); i += 1 + rng() % 7) random_cuts.push_back(i);
    ASSERT_EQ(ParsePieces(c.text, random_cuts), c.want) << Json(c.text).dump();
  }
}

TEST(ToolCallParser, UndeclaredAndMalformedCallsAreTextNeverAnError) {
  for (const std::string& m :
       {std::string("<tool_call></tool_call>"), std::string("<tool_call>a b</tool_call>"),
        std::string("<tool_call>now stray</tool_call>"),
        std::string("<tool_call>now<arg_key>k</arg_key></tool_call>"),
        std::string("<tool_call>now<arg_key>k<arg_value>v</arg_value></tool_call>"),
        std::string("<tool_call>now<arg_key></arg_key><arg_value>v</arg_value></tool_call>"),
        std::string("<tool_call>now<arg_value>v</arg_value></tool_call>"),
        std::string("<tool_call>now<arg_key>k</arg_key><arg_value>v</tool_call>")}) {
    Parsed p = ParsePieces("a" + m + "b", {});
    EXPECT_EQ(p.content, "a" + m + "b") << m;
    EXPECT_TRUE(p.calls.empty()) << m;
    EXPECT_EQ(p.malformed, 1) << m;
  }
  Parsed u = ParsePieces("<tool_call>delete_all</tool_call>", {});
  EXPECT_EQ(u.content, "<tool_call>delete_all</tool_call>");
  EXPECT_EQ(u.unknown, 1);
  // Without declared tools every well-formed name is a call.
  ToolCallParser any{Json()};
  auto o = any.Push("<tool_call>delete_all</tool_call>");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "delete_all");
}

TEST(ToolCallParser, ValuesAreTypedByTheSchema) {
  const Json schemas = Json::parse(R"({
    "s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},
    "a":{"type":"array"},"o":{"type":"object"},"sn":{"type":["string","null"]},
    "in":{"anyOf":[{"type":"integer"},{"type":"null"}]},"e":{"enum":["x","1"]},"none":{}})");
  struct C {
    const char* key;
    const char* written;
    Json want;
  };
  for (const C& c : {C{"s", "42", "42"},
                     C{"s", " padded\n", " padded\n"},
                     C{"i", "42", 42},
                     C{"i", " -7 ", -7},
                     C{"i", "4.0", 4},
                     C{"i", "4.5", "4.5"},
                     C{"i", "many", "many"},
                     C{"n", "2.5", 2.5},
                     C{"n", "1e3", 1000.0},
                     C{"b", "true", true},
                     C{"b", "False", false},
                     C{"b", "yes", "yes"},
                     C{"a", "[1, \"<&>\"]", Json::parse("[1, \"<&>\"]")},
                     C{"a", "{}", "{}"},
                     C{"o", "{\"k\": [1]}", Json::parse("{\"k\": [1]}")},
                     C{"o", "[1]", "[1]"},
                     C{"sn", "null", nullptr},
                     C{"sn", "word", "word"},
                     C{"in", "None", nullptr},
                     C{"in", "12", 12},
                     C{"e", "1", "1"},
                     C{"e", "\"x\"", "x"},
                     C{"e", "x", "x"},
                     C{"none", "[2]", Json::parse("[2]")},
                     C{"none", "plain text", "plain text"}}) {
    const Json* schema = &schemas[c.key];
    EXPECT_EQ(TypedArgument(c.written, schema), c.want) << c.key << " " << c.written;
  }
  EXPECT_EQ(TypedArgument("{\"a\":1}", nullptr), Json::parse("{\"a\":1}"));
  EXPECT_EQ(TypedArgument("Paris", nullptr), "Paris");
}

// A model that opens a tool call inside an unfinished <think>: the call ends the reasoning and
// is parsed; the same at every piece size.
TEST(ReasoningParser, ToolCallInsideUnfinishedThinkEndsIt) {
  const std::string text = "weigh it <tool_call>now</tool_call>";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    ReasoningParser r(/*start_in_reasoning=*/true, /*end_on_tool_call=*/true);
    ToolCallParser t(Tools());
    std::string reasoning;
    Parsed p;
    for (size_t i = 0; i <= text.size(); i += piece) {
      const bool last = i + piece > text.size();
      auto o = r.Push(std::string_view(text).substr(i, piece));
      reasoning += o.reasoning;
      Add(&p, t.Push(o.content));
      if (last) {
        auto f = r.Finish();
        reasoning += f.reasoning;
        Add(&p, t.Push(f.content));
        Add(&p, t.Finish());
      }
    }
    EXPECT_EQ(reasoning, "weigh it ") << piece;
    ASSERT_EQ(p.calls.size(), 1u) << piece;
    EXPECT_EQ(p.calls[0].name, "now");
    EXPECT_EQ(p.content, "");
  }
  // Without tool parsing the markup stays in the reasoning.
  ReasoningParser plain(true);
  auto o = plain.Push(text);
  auto f = plain.Finish();
  EXPECT_EQ(o.reasoning + f.reasoning, text);
}

}  // namespace
}  // namespace mx::server::tool_call_parser_test
