// Golden tests for chat templates: the real GLM template against ../shared renders, and
// mxserve's own feature templates under tests/chat_template/ (rendered by
// tools/render_chat_template.py with Python jinja2), plus error handling and a
// mutation fuzz that must never crash.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "tokenizer/jinja.h"

namespace mx {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ordered_json CaseContext(const ordered_json& c) {
  ChatRequest req;
  if (c.contains("messages")) req.messages = c["messages"];
  if (c.contains("tools")) req.tools = c["tools"];
  req.add_generation_prompt = c.value("add_generation_prompt", true);
  if (c.contains("kwargs")) req.kwargs = c["kwargs"];
  if (c.contains("bos_token")) req.bos_token = c["bos_token"].get<std::string>();
  if (c.contains("eos_token")) req.eos_token = c["eos_token"].get<std::string>();
  return MakeChatContext(req);
}

std::vector<fs::path> CaseFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

const fs::path kSharedDir = fs::path(MX_SHARED_DIR) / "chat-templates";
const fs::path kOwnDir = fs::path(MX_SOURCE_DIR) / "tests" / "chat_template";

TEST(ChatTemplateGolden, Glm46MatchesJinja2) {
  const fs::path tmpl_path = kSharedDir / "glm-4.6.jinja";
  if (!fs::exists(tmpl_path)) GTEST_SKIP() << "no " << tmpl_path;
  auto tmpl = ChatTemplate::Parse(ReadFile(tmpl_path), "glm-4.6.jinja");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  auto cases = CaseFiles(kSharedDir / "cases");
  ASSERT_FALSE(cases.empty());
  for (const fs::path& json_path : cases) {
    SCOPED_TRACE(json_path.filename().string());
    ordered_json c = ordered_json::parse(ReadFile(json_path));
    auto out = tmpl->Render(CaseContext(c));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    fs::path expected = json_path;
    expected.replace_extension(".txt");
    EXPECT_EQ(*out, ReadFile(expected));
  }
}

TEST(ChatTemplateGolden, OwnFeatureTemplatesMatchJinja2) {
  auto cases = CaseFiles(kOwnDir);
  ASSERT_GE(cases.size(), 10u) << kOwnDir;
  for (const fs::path& json_path : cases) {
    SCOPED_TRACE(json_path.filename().string());
    ordered_json c = ordered_json::parse(ReadFile(json_path));
    fs::path tmpl_path = json_path;
    tmpl_path.replace_extension(".jinja");
    if (c.contains("template")) tmpl_path = kOwnDir / c["template"].get<std::string>();
    auto tmpl = ChatTemplate::Parse(ReadFile(tmpl_path), tmpl_path.filename().string());
    fs::path txt = json_path, err = json_path;
    txt.replace_extension(".txt");
    err.replace_extension(".err");
    if (fs::exists(err)) {
      // jinja2 failed; we must fail too, with the same message.
      std::string want = ReadFile(err);
      if (want.rfind("ERROR: ", 0) == 0) want = want.substr(7);
      Status got = tmpl.status();
      if (tmpl.ok()) {
        auto out = tmpl->Render(CaseContext(c));
        ASSERT_FALSE(out.ok()) << "jinja2 says: " << want << "\nwe rendered: " << *out;
        got = out.status();
      }
      EXPECT_NE(got.message().find(want), std::string::npos)
          << "jinja2: " << want << "\nmxserve: " << got.message();
      continue;
    }
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    auto out = tmpl->Render(CaseContext(c));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, ReadFile(txt));
  }
}

TEST(ChatTemplate, ContextKeyOrderIsKept) {
  auto t = ChatTemplate::Parse("{{ x | tojson }}|{% for k in x %}{{ k }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render(ordered_json::parse(R"({"x": {"b": 1, "a": [1.5, null, true]}})"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, R"({"b": 1, "a": [1.5, null, true]}|ba)");
}

TEST(ChatTemplate, PlainJsonContextWorks) {
  auto t = ChatTemplate::Parse("{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render(nlohmann::json::parse(R"({"messages": [{"content": "hi"}]})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "hi");
}

// ---- errors ----

std::string ParseError(const std::string& src) {
  auto t = ChatTemplate::Parse(src);
  return t.ok() ? std::string("<parsed>") : t.status().message();
}

std::string RenderError(const std::string& src, const char* ctx = "{}") {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "<parse error> " + t.status().message();
  auto out = t->Render(ordered_json::parse(ctx));
  return out.ok() ? "<rendered> " + *out : out.status().message();
}

TEST(ChatTemplateErrors, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(ParseError("ab\n  {{ x "),
            "template:2:3: unexpected end of template: unclosed '{{' tag");
  EXPECT_EQ(ParseError("{% if x %}a"),
            "template:1:12: Unexpected end of template. Jinja was looking for the following "
            "tags: 'elif', 'else' or 'endif'. The innermost block that needs to be closed is "
            "'if' (line 1).");
  EXPECT_EQ(ParseError("{% for %}"), "template:1:8: can't assign to 'end of statement block'");
  EXPECT_EQ(ParseError("x\n{{ 1 + }}"), "template:2:8: unexpected 'end of print statement'");
  EXPECT_EQ(ParseError("{# never closed"), "template:1:1: Missing end of comment tag");
  EXPECT_EQ(ParseError("{% frobnicate %}"), "template:1:4: Encountered unknown tag 'frobnicate'.");
  EXPECT_EQ(ParseError("{{ (1 }}"), "template:1:7: unexpected '}', expected ')'");
  EXPECT_EQ(ParseError("{% break %}"), "template:1:4: 'break' outside loop");
  EXPECT_EQ(ParseError("{{ 'abc }}"), "template:1:4: unexpected char '''");
  EXPECT_EQ(ParseError("{% endfor %}"), "template:1:4: Encountered unknown tag 'endfor'.");
  EXPECT_EQ(ParseError("{{ a ! b }}"), "template:1:6: unexpected char '!'");
}

TEST(ChatTemplateErrors, RenderErrorsAreStatuses) {
  EXPECT_EQ(RenderError("a{{ raise_exception('bad role') }}"), "template:1:5: bad role");
  EXPECT_EQ(RenderError("{{ x | nosuchfilter }}"), "template:1:8: No filter named 'nosuchfilter'.");
  EXPECT_EQ(RenderError("{% if false %}{{ x | nosuchfilter }}{% endif %}ok"), "<rendered> ok");
  EXPECT_EQ(RenderError("{{ x is nosuchtest }}"), "template:1:6: No test named 'nosuchtest'.");
  EXPECT_EQ(RenderError("{{ foo() }}"), "template:1:4: 'foo' is undefined");
  EXPECT_EQ(RenderError("{{ d.x() }}", R"({"d": {}})"),
            "template:1:4: 'dict object' has no attribute 'x'");
  EXPECT_EQ(RenderError("{{ 'a' + 1 }}"),
            "template:1:8: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(RenderError("{{ 1 < 'a' }}"),
            "template:1:4: '<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(RenderError("{{ [1].append(2) }}"),
            "template:1:4: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(RenderError("{{ 1 // 0 }}"), "template:1:6: integer division or modulo by zero");
  EXPECT_EQ(RenderError("{% for x in none %}{% endfor %}"),
            "template:1:13: 'NoneType' object is not iterable");
  EXPECT_EQ(RenderError("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "template:1:34: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(RenderError("{{ range(1000000) | length }}"),
            "template:1:4: Range too big. The sandbox blocks ranges larger than MAX_RANGE "
            "(100000).");
}

TEST(ChatTemplateErrors, HostileTemplatesHitLimits) {
  // Infinite recursion.
  EXPECT_NE(
      RenderError("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion deeper than"),
      std::string::npos);
  // Quadratic blow-up of work (a small step budget keeps the test fast).
  auto quadratic = jinja::Parse(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(quadratic.ok());
  jinja::RenderLimits limits;
  limits.max_steps = 300'000;
  auto out = jinja::Render(**quadratic, jinja::Dict{}, limits);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("evaluation steps"), std::string::npos);
  // Output that doubles each round.
  EXPECT_NE(RenderError("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}"
                        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}")
                .find("byte limit"),
            std::string::npos);
  EXPECT_NE(RenderError("{{ 'x' * 100000000000 }}").find("byte limit"), std::string::npos);
  // Deep nesting is rejected by the parser, not the stack.
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(ParseError(deep).find("nested too deeply"), std::string::npos);
  std::string deep_blocks;
  for (int i = 0; i < 3000; ++i) deep_blocks += "{% if x %}";
  EXPECT_NE(ParseError(deep_blocks).find("nested too deeply"), std::string::npos);
  std::string deep_not = "{{ " + [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "not ";
    return s;
  }() + "x }}";
  EXPECT_NE(ParseError(deep_not).find("nested too deeply"), std::string::npos);
  // A namespace that contains itself still prints and frees.
  EXPECT_EQ(RenderError("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"),
            "<rendered> True");
}

// Mutates the GLM template many times (byte flips, deletions, duplications, splices of
// Jinja syntax) and renders each survivor against every golden case: Parse and Render
// must return, never crash, under ASan too.
TEST(ChatTemplateFuzz, MutatedGlmTemplateNeverCrashes) {
  const fs::path tmpl_path = kSharedDir / "glm-4.6.jinja";
  if (!fs::exists(tmpl_path)) GTEST_SKIP() << "no " << tmpl_path;
  const std::string base = ReadFile(tmpl_path);
  std::vector<ordered_json> contexts;
  for (const fs::path& p : CaseFiles(kSharedDir / "cases"))
    contexts.push_back(CaseContext(ordered_json::parse(ReadFile(p))));
  static const char* const kSnippets[] = {"{%",         "%}",     "{{",    "}}",
                                          "{#",         "#}",     "{%-",   "-%}",
                                          "(",          ")",      "[",     "]",
                                          "{",          "}",      "|",     "'",
                                          "\"",         "\\",     "loop.", "ns.",
                                          "for x in",   "endfor", "if",    "endif",
                                          "else",       "elif",   "macro", "endmacro",
                                          "set",        "=",      ".",     ",",
                                          ":",          "~",      "**",    "//",
                                          "not ",       " in ",   " is ",  "tojson",
                                          "[::-1]",     "\xff",   "\xc3",  "raise_exception(",
                                          "namespace(", "range(", "\n",    " ",
                                          "0",          "-1",     "1e308", "9999999999999999999"};
  std::mt19937 rng(1234);
  int parsed = 0;
  const int kIterations = 3000;
  for (int it = 0; it < kIterations; ++it) {
    std::string s = base;
    const int n_mut = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < n_mut && !s.empty(); ++m) {
      size_t pos = rng() % s.size();
      switch (rng() % 5) {
        case 0:
          s[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(pos, 1 + rng() % 16);
          break;
        case 2:
          s.insert(pos, kSnippets[rng() % (sizeof(kSnippets) / sizeof(kSnippets[0]))]);
          break;
        case 3: {
          size_t len = 1 + rng() % 64;
          size_t from = rng() % s.size();
          s.insert(pos, s.substr(from, len));
          break;
        }
        case 4: {
          size_t len = std::min<size_t>(1 + rng() % 64, s.size() - pos);
          s.erase(pos, len);
          break;
        }
      }
    }
    auto t = ChatTemplate::Parse(s);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++parsed;
    const ordered_json& ctx = contexts[it % contexts.size()];
    auto out = t->Render(ctx);
    if (!out.ok()) {
      EXPECT_FALSE(out.status().message().empty());
    }
  }
  EXPECT_GT(parsed, kIterations / 20);  // the fuzz reaches the renderer
}

TEST(ChatTemplateFuzz, RandomGarbageNeverCrashes) {
  std::mt19937 rng(99);
  const std::string alphabet =
      "{}%#-+()[]|.,:~'\"\\ \n\tabcxyz0123456789=<>!*/if for in endif endfor set";
  for (int it = 0; it < 3000; ++it) {
    std::string s;
    size_t len = rng() % 80;
    for (size_t k = 0; k < len; ++k) s.push_back(alphabet[rng() % alphabet.size()]);
    auto t = ChatTemplate::Parse(s);
    if (t.ok()) (void)t->Render(ordered_json::parse(R"({"x": [1, "a", {"b": null}]})"));
  }
}

// ---- tokenizer_config.json ----

class TokenizerConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mx_chat_tmpl_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& text) {
    std::ofstream(dir_ / "tokenizer_config.json", std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(TokenizerConfigTest, StringTemplateAndTokenObjects) {
  Write(R"({"chat_template": "{{ bos_token }}hi", "bos_token": {"content": "<s>"},
            "eos_token": "</s>"})");
  auto cfg = LoadTokenizerChatConfig(dir_.string());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->chat_template, "{{ bos_token }}hi");
  EXPECT_EQ(cfg->bos_token, "<s>");
  EXPECT_EQ(cfg->eos_token, "</s>");
}

TEST_F(TokenizerConfigTest, ListPicksDefault) {
  Write(R"({"chat_template": [{"name": "tool_use", "template": "T"},
                              {"name": "default", "template": "D"}]})");
  auto cfg = LoadTokenizerChatConfig(dir_.string());
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->chat_template, "D");
}

TEST_F(TokenizerConfigTest, ErrorsNameTheFile) {
  Write(R"({"bos_token": "<s>"})");
  auto cfg = LoadTokenizerChatConfig(dir_.string());
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("tokenizer_config.json: no 'chat_template'"),
            std::string::npos);
  Write("{not json");
  cfg = LoadTokenizerChatConfig(dir_.string());
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace mx
