// Structured-output mask speed: per-token mask time (TokenMatcher::FillMask) and compile time
// (GrammarCache::Get: constraint text -> grammar) over the JSON-schema corpus of the grammar
// tests (hand-written + seeded random schemas), for the bundled model's vocabulary and a
// synthetic byte-level BPE vocabulary of GLM-5's size (grammar/synthetic_vocab_test_util.h).
// Each schema is decoded `gens` times by a random walk over the allowed tokens (a bias toward
// closing tokens and EOS keeps documents short): the first decode meets every mask-cache key
// for the first time (cold), the later ones find them cached (warm, a server's steady state
// for a schema it has seen). The host is shared: run nothing else meanwhile.
//
//   grammar_bench [vocab=both|bundled|synthetic] [size=150000] [schemas=200] [gens=3]
//                 [frames=8] [steps=256] [seed=1] [refine=0] [share=1]
// "mask all" is every step of every decode (first visits included), the per-token figure;
// refine=1 / share=0 turn on the mask cache's parent refinement / off its sharing across
// schemas.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/constraint.h"
#include "grammar/json_schema_corpus_test_util.h"
#include "grammar/synthetic_vocab_test_util.h"
#include "grammar/vocab_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using mx::grammar::ConstraintKind;
using mx::grammar::GrammarCache;
using mx::grammar::TokenBitmask;
using mx::grammar::TokenMatcher;
using mx::grammar::VocabIndex;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::shared_ptr<const VocabIndex> Bundled() {
  const std::string dir = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";
  auto t = mx::tok::Tokenizer::FromFile(dir + "/tokenizer.json");
  if (!t.ok()) {
    fmt::print(stderr, "{}\n", t.status().ToString());
    std::exit(1);
  }
  std::ifstream in(dir + "/generation_config.json");
  const auto gc = nlohmann::json::parse(in);
  return mx::grammar::VocabFromTokenizer(*t, gc["eos_token_id"].get<std::vector<int32_t>>(),
                                         t->vocab_size());
}

std::shared_ptr<const VocabIndex> Synthetic(int n, uint64_t seed) {
  std::vector<std::string> toks = mx::grammar::testing::SyntheticBpeTokens(n - 1, seed);
  const auto eos = static_cast<int32_t>(toks.size());
  toks.emplace_back();  // EOS
  return std::make_shared<const VocabIndex>(std::move(toks), std::vector<int32_t>{eos},
                                            std::vector<int32_t>{});
}

void Run(const std::string& name, const std::shared_ptr<const VocabIndex>& vocab,
         const std::vector<std::string>& corpus, const std::map<std::string, std::string>& a) {
  const int gens = std::stoi(a.at("gens"));
  const int max_steps = std::stoi(a.at("steps"));
  mx::grammar::GrammarCacheOptions opt;
  opt.masks.frames = std::stoi(a.at("frames"));
  opt.masks.refine = a.at("refine") != "0";
  opt.masks.share = a.at("share") != "0";
  opt.capacity = 100000;
  GrammarCache cache(vocab, opt);
  std::mt19937_64 rng(std::stoull(a.at("seed")));
  std::vector<double> compile, cold, warm;
  int64_t finished = 0, decodes = 0, entries = 0;
  TokenBitmask mask;
  std::vector<int32_t> allowed, closing;
  for (const std::string& s : corpus) {
    const double t0 = Now();
    auto cg = cache.Get({ConstraintKind::kJsonSchema, s, {}});
    compile.push_back(Now() - t0);
    if (!cg.ok()) {
      fmt::print(stderr, "{}: {}\n", s, cg.status().ToString());
      continue;
    }
    for (int g = 0; g < gens; ++g) {
      TokenMatcher tm(*cg);
      ++decodes;
      for (int step = 0; step < max_steps; ++step) {
        const double t1 = Now();
        tm.FillMask(&mask);
        (g == 0 ? cold : warm).push_back(Now() - t1);
        allowed.clear();
        closing.clear();
        const auto& w = mask.words();
        for (size_t k = 0; k < w.size(); ++k) {
          for (uint64_t x = w[k]; x != 0; x &= x - 1) {
            const auto id = static_cast<int32_t>(k * 64 + static_cast<size_t>(__builtin_ctzll(x)));
            allowed.push_back(id);
            if (vocab->IsEos(id) || vocab->bytes(id).find_first_of("\"]}") != std::string::npos)
              closing.push_back(id);
          }
        }
        if (allowed.empty()) break;
        const auto& from = !closing.empty() && rng() % 2 ? closing : allowed;
        const int32_t pick = from[rng() % from.size()];
        if (!tm.AcceptToken(pick)) {
          fmt::print(stderr, "an allowed token was refused ({})\n", s);
          std::exit(1);
        }
        if (tm.Terminated()) {
          ++finished;
          break;
        }
      }
    }
    entries += (*cg)->cached();
  }
  auto us = [](double x) { return x * 1e6; };
  fmt::print("{} vocabulary ({} tokens), {} schemas, frames={}\n", name, vocab->size(),
             corpus.size(), a.at("frames"));
  fmt::print("  compile  p50 {:9.1f} us  p99 {:9.1f} us\n", us(Pct(compile, 0.5)),
             us(Pct(compile, 0.99)));
  fmt::print("  mask cold p50 {:8.1f} us  p99 {:9.1f} us  max {:9.1f} us  ({} tokens)\n",
             us(Pct(cold, 0.5)), us(Pct(cold, 0.99)), us(Pct(cold, 1.0)), cold.size());
  fmt::print("  mask warm p50 {:8.1f} us  p99 {:9.1f} us  max {:9.1f} us  ({} tokens)\n",
             us(Pct(warm, 0.5)), us(Pct(warm, 0.99)), us(Pct(warm, 1.0)), warm.size());
  std::vector<double> all = cold;
  all.insert(all.end(), warm.begin(), warm.end());
  // The per-token figure: every step of every decode, first visits included.
  fmt::print("  mask all  p50 {:8.1f} us  p99 {:9.1f} us  max {:9.1f} us  ({} tokens)\n",
             us(Pct(all, 0.5)), us(Pct(all, 0.99)), us(Pct(all, 1.0)), all.size());
  fmt::print("  {} of {} decodes finished; {:.1f} cached masks per schema\n", finished, decodes,
             static_cast<double>(entries) / static_cast<double>(corpus.size()));
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"vocab", "both"}, {"size", "150000"}, {"schemas", "200"},
                                          {"gens", "3"},     {"frames", "8"},    {"steps", "256"},
                                          {"seed", "1"},     {"refine", "0"},    {"share", "1"}};
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t eq = s.find('=');
    if (eq == std::string::npos || !a.count(s.substr(0, eq))) {
      fmt::print(stderr, "unknown argument '{}'\n", s);
      return 2;
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  std::vector<std::string> corpus = mx::grammar::testing::HandWrittenSchemas();
  mx::grammar::testing::SchemaGenerator gen(std::stoull(a["seed"]));
  for (int i = 0, n = std::stoi(a["schemas"]); i < n; ++i) corpus.push_back(gen.Next().dump());
  if (a["vocab"] != "synthetic") Run("bundled", Bundled(), corpus, a);
  if (a["vocab"] != "bundled")
    Run("synthetic byte-level BPE", Synthetic(std::stoi(a["size"]), 3), corpus, a);
  return 0;
}
