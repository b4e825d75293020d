// Structured output through the engine: the bundled model under a JSON schema (plain and
// speculative, batched, sampled), and a fake model whose favourite token is almost never
// allowed (adversarial): outputs parse and validate, EOS ends complete outputs even with
// ignore_eos, the grammar waits for its start token, aborts release constrained requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/arith_prompts_test_util.h"
#include "engine/engine.h"
#include "engine/engine_factory.h"
#include "engine/engine_test_util.h"
#include "engine/request_constraint.h"
#include "grammar/constraint.h"
#include "grammar/vocab_tokenizer.h"

namespace mx::constraint_test {
namespace {

using Json = nlohmann::ordered_json;
constexpr char kAnswerSchema[] =
    R"({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]})";

std::unique_ptr<Engine> MakeBundled(int spec_steps, bool overlap_masks = true) {
  EngineOptions o;
  o.model.model_dir = kBundledModelDir;
  o.threads = 1;
  o.overlap_masks = overlap_masks;
  o.page_size = 4;
  o.max_total_tokens = 8192;
  o.chunked_prefill_size = 32;  // prompts arrive in chunks
  if (spec_steps > 0) {
    o.speculative.algorithm = SpeculativeAlgorithm::kMtp;
    o.speculative.num_steps = spec_steps;
  }
  auto e = CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

struct Outputs {
  std::vector<std::string> texts;
  std::vector<FinishReason> finish;
  std::vector<std::vector<int32_t>> tokens;
};

Outputs RunAll(Engine& e, const tok::Tokenizer& tok,
               const std::vector<std::vector<int32_t>>& prompts,
               const std::shared_ptr<const grammar::CompiledGrammar>& g, float temperature) {
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest r;
    r.prompt = prompts[i];
    r.max_tokens = 120;
    r.sampling.temperature = temperature;
    r.sampling.seed = 100 + i;
    r.constraint = g;
    auto s = e.Submit(r);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) streams.push_back(std::move(*s));
  }
  Outputs out;
  for (auto& s : streams) {
    StreamResult r = Drain(*s);
    EXPECT_FALSE(r.timed_out);
    EXPECT_TRUE(r.last.error.ok()) << r.last.error.ToString();
    std::vector<int32_t> body = r.tokens;
    if (!body.empty() && r.last.matched_stop_token) body.pop_back();  // the EOS
    out.texts.push_back(tok.Decode(body));
    out.finish.push_back(r.last.finish);
    out.tokens.push_back(r.tokens);
  }
  return out;
}

TEST(Constraint, BundledModelAnswersInTheSchemaPlainAndSpeculative) {
  std::vector<std::string> answers;
  const auto prompts = ArithPrompts(12, &answers);
  auto tok = tok::Tokenizer::FromFile(kBundledModelDir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  std::vector<std::vector<int32_t>> greedy;
  // Plain and speculative, each with the masks computed beside the forward (a verify's along
  // its drafts) and at sampling.
  for (auto [steps, overlap] :
       {std::pair{0, true}, std::pair{0, false}, std::pair{3, true}, std::pair{3, false}}) {
    auto e = MakeBundled(steps, overlap);
    ASSERT_NE(e, nullptr);
    grammar::GrammarCache cache(
        grammar::VocabFromTokenizer(*tok, e->eos_ids(), static_cast<int32_t>(e->vocab_size())));
    auto g = cache.Get({grammar::ConstraintKind::kJsonSchema, kAnswerSchema, {}});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (float temp : {0.0f, 1.0f}) {
      // Twice: the second round hits the radix cache.
      for (int round = 0; round < 2; ++round) {
        const Outputs o = RunAll(*e, *tok, prompts, *g, temp);
        int correct = 0;
        for (size_t i = 0; i < o.texts.size(); ++i) {
          EXPECT_EQ(o.finish[i], FinishReason::kStop) << o.texts[i];
          const Json j = Json::parse(o.texts[i], nullptr, false);
          ASSERT_TRUE(j.is_object() && j.size() == 1 && j["answer"].is_number_integer())
              << "steps " << steps << " temp " << temp << ": '" << o.texts[i] << "'";
          correct += j["answer"].dump() == answers[i];
        }
        if (temp == 0 && round == 0) {
          std::printf("[ constrained ] spec steps %d, overlap %d: %d / %zu answers correct\n",
                      steps, overlap, correct, prompts.size());
          if (steps == 0 && overlap) {
            // The same problems unconstrained: the number the model writes last (its format is
            // "... #### N"), for the accuracy beside the constrained one.
            const Outputs u = RunAll(*e, *tok, prompts, nullptr, 0.0f);
            int free_correct = 0;
            for (size_t i = 0; i < u.texts.size(); ++i) {
              const std::string& t = u.texts[i];
              const size_t end = t.find_last_of("0123456789");
              if (end == std::string::npos) continue;
              size_t begin = t.find_last_not_of("0123456789", end);
              begin = begin == std::string::npos ? 0 : begin + 1;
              if (begin > 0 && t[begin - 1] == '-') --begin;
              free_correct += t.substr(begin, end + 1 - begin) == answers[i];
            }
            std::printf("[ unconstrained ] %d / %zu answers correct\n", free_correct,
                        prompts.size());
          }
          // Masks at sampling and speculative greedy output give the first run's tokens.
          if (greedy.empty()) {
            greedy = o.tokens;
          } else {
            EXPECT_EQ(o.tokens, greedy) << "steps " << steps << ", overlap " << overlap;
          }
        }
      }
    }
  }
}

// The single bytes of FakeVocab: token id i < size() is kAlpha[i].
constexpr std::string_view kAlpha = "{}[]\":, 0123456789abcdefnrtulxyz-.";
int32_t AlphaId(char c) { return static_cast<int32_t>(kAlpha.find(c)); }

// A vocabulary for FakeRunner's ids: the bytes of JSON and a few multi-byte tokens.
std::shared_ptr<const grammar::VocabIndex> FakeVocab(int32_t V, int32_t eos) {
  const std::string alpha(kAlpha);
  std::vector<std::string> bytes(V);
  std::mt19937 rng(3);
  for (int32_t id = 0; id < V; ++id) {
    if (id == eos) continue;
    const int len = id < static_cast<int32_t>(alpha.size()) ? 1 : 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < len; ++k) {
      bytes[id].push_back(len == 1 && id < static_cast<int32_t>(alpha.size())
                              ? alpha[id]
                              : alpha[rng() % alpha.size()]);
    }
  }
  return std::make_shared<const grammar::VocabIndex>(bytes, std::vector<int32_t>{eos},
                                                     std::vector<int32_t>{});
}

// The tokens c's mask leaves (over a vocabulary of V).
std::vector<bool> Allowed(RequestConstraint& c, int32_t V) {
  std::vector<float> l(V, 1.0f);
  c.Mask(l);
  std::vector<bool> allowed(V);
  for (int32_t t = 0; t < V; ++t) allowed[t] = !std::isinf(l[t]);
  return allowed;
}

std::unique_ptr<Engine> MakeFake(int32_t eos) {
  EngineOptions o;
  o.page_size = 4;
  o.max_total_tokens = 4096;
  o.chunked_prefill_size = 8;
  o.kv_cache_dtype = KvCacheDtype::kF32;  // FakeRunner keeps its hash in a KV row
  auto e = CreateEngineWithRunner(o, std::make_unique<FakeRunner>(TinyTestConfig()), std::nullopt,
                                  {eos});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

std::string Text(const grammar::VocabIndex& v, const std::vector<int32_t>& ids, size_t from) {
  std::string s;
  for (size_t i = from; i < ids.size(); ++i) {
    if (!v.IsEos(ids[i])) s += v.bytes(ids[i]);
  }
  return s;
}

// Masks prefetched on the MaskPrefetcher's thread equal masks computed at sampling; drafts are
// cut at their first refused token (before the start token they are free) and the state is
// unchanged after the cut.
TEST(Constraint, PrefetchedMasksAndTrimmedDrafts) {
  const int32_t V = 300, eos = 299;
  auto vocab = FakeVocab(V, eos);
  grammar::GrammarCache cache(vocab);
  auto g = cache.Get({grammar::ConstraintKind::kRegex, "[0-9]{2,4}", {}});
  ASSERT_TRUE(g.ok());
  auto id = AlphaId;
  auto masked = [&](RequestConstraint& c) { return Allowed(c, V); };
  RequestConstraint a(*g, -1), b(*g, -1);
  MaskPrefetcher pre;
  for (char c : std::string("1234")) {
    pre.Start({&a});
    pre.Wait();
    const std::vector<bool> want = masked(b);
    EXPECT_EQ(masked(a), want) << c;
    EXPECT_TRUE(want[id(c)]);
    ASSERT_TRUE(a.Accept(id(c)) && b.Accept(id(c)));
  }
  RequestConstraint d(*g, -1);
  ASSERT_TRUE(d.Accept(id('1')));
  const std::vector<bool> before = masked(d);
  std::vector<int32_t> drafts = {id('2'), id('3'), id('x'), id('4')};
  d.TrimDrafts(&drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{id('2'), id('3')}));
  drafts = {id('2'), eos, id('3')};  // "12" may end: EOS fits, nothing after it
  d.TrimDrafts(&drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{id('2'), eos}));
  drafts = {id('x')};
  d.TrimDrafts(&drafts);
  EXPECT_TRUE(drafts.empty());
  EXPECT_EQ(masked(d), before);         // the state is the one before the trims
  RequestConstraint late(*g, id('z'));  // starts after 'z'
  drafts = {id('x'), id('y'), id('z'), id('5'), id('x')};
  late.TrimDrafts(&drafts);
  EXPECT_EQ(drafts, (std::vector<int32_t>{id('x'), id('y'), id('z'), id('5')}));
  EXPECT_FALSE(late.active());
}

// A verify's masks: after TrimDrafts keeps a chain, the prefetch computes the masks of the
// states along it; accepting the chain's tokens moves through them, and a token off the chain
// (a rejected draft's replacement) drops the rest. Every mask equals the one a constraint never
// prefetched computes at sampling, and the walk leaves the matcher's state as it was.
TEST(Constraint, PrefetchedVerifyMasksFollowTheDraftChain) {
  const int32_t V = 300, eos = 299;
  auto vocab = FakeVocab(V, eos);
  grammar::GrammarCache cache(vocab);
  auto g = cache.Get({grammar::ConstraintKind::kRegex, "[0-9]{2,4}(ab|x)?", {}});
  ASSERT_TRUE(g.ok());
  auto id = AlphaId;
  auto masked = [&](RequestConstraint& c) { return Allowed(c, V); };
  // Each case: the drafts proposed, then the tokens the verify emits.
  struct Case {
    std::string drafts;
    std::string emitted;
    bool with_eos;  // the chain ends with EOS (after the drafts kept)
  };
  for (const Case& c :
       {Case{"123a", "123a", false}, Case{"1234", "129", false}, Case{"12x", "12x", true},
        Case{"5y7", "57", false}, Case{"123", "4", false}}) {
    RequestConstraint v(*g, -1), ref(*g, -1);
    MaskPrefetcher pre;
    std::vector<int32_t> drafts;
    for (char ch : c.drafts) drafts.push_back(id(ch));
    if (c.with_eos) drafts.push_back(eos);
    v.TrimDrafts(&drafts);
    pre.Start({&v});
    pre.Wait();
    std::vector<int32_t> emitted;
    for (char ch : c.emitted) emitted.push_back(id(ch));
    if (c.with_eos) emitted.push_back(eos);
    for (size_t i = 0; i < emitted.size(); ++i) {
      const std::vector<bool> want = masked(ref);
      ASSERT_EQ(masked(v), want) << c.drafts << " -> " << c.emitted << ", row " << i;
      if (!want[emitted[i]]) break;  // the case emits past what the grammar allows: stop here
      ASSERT_TRUE(v.Accept(emitted[i]) && ref.Accept(emitted[i]));
    }
    EXPECT_EQ(v.Terminated(), ref.Terminated());
    if (!ref.Terminated()) {
      EXPECT_EQ(masked(v), masked(ref)) << c.drafts;
    }
  }
}

TEST(Constraint, AdversarialFakeModelStaysInTheGrammar) {
  const int32_t V = 320, eos = 319;
  auto e = MakeFake(eos);
  ASSERT_NE(e, nullptr);
  auto vocab = FakeVocab(V, eos);
  grammar::GrammarCache cache(vocab);
  const std::string schema =
      R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer","minimum":0,"maximum":99},"maxItems":3},"b":{"enum":["x","yz"]}},"required":["a","b"]})";
  auto g = cache.Get({grammar::ConstraintKind::kJsonSchema, schema, {}});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::mt19937 rng(4);
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (int i = 0; i < 16; ++i) {
    GenerationRequest r;
    for (int k = 0; k < 3 + i; ++k) r.prompt.push_back(static_cast<int32_t>(rng() % 300));
    r.max_tokens = 200;
    r.sampling.temperature = i % 2 ? 1.0f : 0.0f;
    r.sampling.seed = i;
    r.ignore_eos = i % 4 == 3;  // a complete grammar still ends the request
    r.constraint = *g;
    auto sub = e->Submit(r);
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    streams.push_back(std::move(*sub));
  }
  for (auto& s : streams) {
    StreamResult r = Drain(*s);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.last.finish, FinishReason::kStop) << r.last.error.ToString();
    const std::string text = Text(*vocab, r.tokens, 0);
    const Json j = Json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j["a"].is_array() && j["a"].size() <= 3) << text;
    EXPECT_TRUE(j["b"] == "x" || j["b"] == "yz") << text;
  }
}

TEST(Constraint, GrammarStartsAfterItsStartTokenAndAbortEndsIt) {
  const int32_t eos = 319;
  auto e = MakeFake(eos);
  auto vocab = FakeVocab(320, eos);
  grammar::GrammarCache cache(vocab);
  auto g = cache.Get({grammar::ConstraintKind::kRegex, "[0-9]{3}", {}});
  ASSERT_TRUE(g.ok());
  const std::vector<int32_t> prompt = {5, 17, 200, 33};
  const std::vector<int32_t> free_run = FakeGreedy(prompt, 4, 320);
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = 50;
  r.sampling.temperature = 0;
  r.constraint = *g;
  r.constraint_after_token = free_run[2];  // the third free token opens the grammar
  auto sub = e->Submit(r);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  StreamResult out = Drain(**sub);
  ASSERT_GE(out.tokens.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(out.tokens.begin(), out.tokens.begin() + 3),
            std::vector<int32_t>(free_run.begin(), free_run.begin() + 3));
  EXPECT_EQ(out.last.finish, FinishReason::kStop);
  const std::string tail = Text(*vocab, out.tokens, 3);
  EXPECT_EQ(tail.size(), 3u) << tail;
  for (char c : tail) EXPECT_TRUE(c >= '0' && c <= '9') << tail;

  // A constrained request aborted mid-way ends and releases its pages.
  GenerationRequest long_req;
  long_req.prompt = prompt;
  long_req.max_tokens = 400;
  long_req.ignore_eos = true;
  auto json = cache.Get({grammar::ConstraintKind::kJsonObject, "", {}});
  ASSERT_TRUE(json.ok());
  long_req.constraint = *json;
  auto s = e->Submit(long_req);
  ASSERT_TRUE(s.ok());
  e->Abort((*s)->id());
  StreamResult ab = Drain(**s);
  EXPECT_FALSE(ab.timed_out);
  EXPECT_TRUE(ab.last.finish == FinishReason::kAbort || ab.last.finish == FinishReason::kStop);
  EXPECT_TRUE(WaitFor([&] { return e->Stats().gauges.running == 0; }, kWaitTimeout,
                      "the aborted request to leave the running set"));

  // A grammar the vocabulary cannot finish ('Q' is no token): the request ends with an error
  // instead of a token outside the grammar.
  auto dead = cache.Get({grammar::ConstraintKind::kRegex, "aQ", {}});
  ASSERT_TRUE(dead.ok());
  GenerationRequest d = r;
  d.constraint = *dead;
  d.constraint_after_token = -1;
  auto ds = e->Submit(d);
  ASSERT_TRUE(ds.ok());
  StreamResult dr = Drain(**ds);
  EXPECT_FALSE(dr.last.error.ok());
  EXPECT_NE(dr.last.error.message().find("constraint"), std::string::npos);
}

// A repeating span (tool_choice auto: a tool call after each <tool_call>): after every start
// token the grammar holds until complete, then the model is free again, and the request is not
// ended by the grammar. Checked token by token against the fake model's own choices.
TEST(Constraint, RepeatingSpanAppliesAfterEachStartToken) {
  const int32_t eos = 319;
  auto e = MakeFake(eos);
  ASSERT_NE(e, nullptr);
  auto vocab = FakeVocab(320, eos);
  grammar::GrammarCache cache(vocab);
  auto g = cache.Get({grammar::ConstraintKind::kRegex, "[0-9]{2}", {}});
  ASSERT_TRUE(g.ok());
  int spans = 0;
  for (const std::vector<int32_t>& prompt :
       {std::vector<int32_t>{5, 17, 200, 33}, std::vector<int32_t>{9, 9, 1}}) {
    const std::vector<int32_t> free_run = FakeGreedy(prompt, 4, 320);
    for (int32_t start : {free_run[1], free_run[0]}) {
      GenerationRequest r;
      r.prompt = prompt;
      r.max_tokens = 60;
      r.ignore_eos = true;
      r.sampling.temperature = 0;
      r.constraint = *g;
      r.constraint_after_token = start;
      r.constraint_repeats = true;
      auto s = e->Submit(r);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      const StreamResult out = Drain(**s);
      EXPECT_TRUE(out.last.error.ok()) << out.last.error.ToString();
      EXPECT_EQ(out.last.finish, FinishReason::kLength);  // the grammar never ends it
      ASSERT_EQ(out.tokens.size(), 60u);
      bool in_span = false;
      std::string span;
      std::vector<int32_t> ctx = prompt;
      for (int32_t t : out.tokens) {
        if (in_span) {
          span += vocab->bytes(t);
          ASSERT_LE(span.size(), 2u) << span;
          if (span.size() == 2) {
            EXPECT_TRUE(std::isdigit(span[0]) && std::isdigit(span[1])) << span;
            in_span = false;
            ++spans;
          }
        } else {
          EXPECT_EQ(t, FakeGreedy(ctx, 1, 320)[0]);  // free: the model's own token
          in_span = t == start;
          span.clear();
        }
        ctx.push_back(t);
      }
    }
  }
  EXPECT_GE(spans, 4);
}

// A thinking budget: after that many reasoning tokens the next token is the end of thinking,
// whatever the model would have written; then the model goes on from it (once).
TEST(ThinkingBudget, EndsTheReasoningWithTheEndTokenOnce) {
  const int32_t eos = 319;
  auto e = MakeFake(eos);
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> prompt = {5, 17, 200, 33};
  const std::vector<int32_t> free_run = FakeGreedy(prompt, 6, 320);
  int32_t end = 300;  // a token the free run does not write early
  while (std::find(free_run.begin(), free_run.end(), end) != free_run.end() || end == eos) --end;
  auto run = [&](int32_t budget, bool open, int32_t start, int32_t end_token) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 10;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.thinking_budget = budget;
    r.think_end_token = end_token;
    r.think_start_token = start;
    r.reasoning_open = open;
    auto s = e->Submit(r);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? Drain(**s).tokens : std::vector<int32_t>{};
  };
  auto follows = [&](const std::vector<int32_t>& out, size_t n) {
    std::vector<int32_t> ctx = prompt;
    ctx.insert(ctx.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
    const std::vector<int32_t> rest = FakeGreedy(ctx, static_cast<int>(out.size() - n), 320);
    return std::equal(rest.begin(), rest.end(), out.begin() + static_cast<std::ptrdiff_t>(n));
  };
  // Budget 3 in an open reasoning: three free tokens, the end token, then the model again.
  std::vector<int32_t> out = run(3, true, -1, end);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3),
            std::vector<int32_t>(free_run.begin(), free_run.begin() + 3));
  EXPECT_EQ(out[3], end);
  EXPECT_TRUE(follows(out, 4));
  // Budget 0: the reasoning ends at once.
  out = run(0, true, -1, end);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0], end);
  EXPECT_TRUE(follows(out, 1));
  // Reasoning opened by the first output token: that token is not counted.
  out = run(2, false, free_run[0], end);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3),
            std::vector<int32_t>(free_run.begin(), free_run.begin() + 3));
  EXPECT_EQ(out[3], end);
  // Not open and no start token: no reasoning, nothing forced.
  out = run(0, false, -1, end);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 6), free_run);
  // A model that ends its reasoning within the budget is left alone.
  out = run(3, true, -1, free_run[1]);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 6), free_run);
}

// The same on the bundled model, plain and speculative: the end of thinking comes within the
// budget and exactly once.
TEST(ThinkingBudget, BundledModelPlainAndSpeculative) {
  auto tok = tok::Tokenizer::FromFile(kBundledModelDir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const int32_t end = *tok->TokenId("</think>");
  std::vector<int32_t> prompt = ArithPrompts(1)[0];
  ASSERT_EQ(prompt.back(), end);  // rendered with thinking off: reopen it
  prompt.back() = *tok->TokenId("<think>");
  for (int spec : {0, 2}) {
    auto e = MakeBundled(spec);
    ASSERT_NE(e, nullptr);
    for (int32_t budget : {0, 1, 5}) {
      GenerationRequest r;
      r.prompt = prompt;
      r.max_tokens = 24;
      r.sampling.temperature = 0;
      r.thinking_budget = budget;
      r.think_end_token = end;
      r.reasoning_open = true;
      auto s = e->Submit(r);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      const StreamResult out = Drain(**s);
      EXPECT_TRUE(out.last.error.ok());
      const auto at = std::find(out.tokens.begin(), out.tokens.end(), end);
      ASSERT_NE(at, out.tokens.end()) << "spec " << spec << " budget " << budget;
      EXPECT_LE(at - out.tokens.begin(), budget) << "spec " << spec;
      EXPECT_EQ(std::count(out.tokens.begin(), out.tokens.end(), end), 1) << "spec " << spec;
    }
  }
}

}  // namespace
}  // namespace mx::constraint_test
