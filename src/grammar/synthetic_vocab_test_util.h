// A synthetic byte-level BPE vocabulary the size of a large model's (GLM-5: about 150k), for
// mask timing (bench/grammar_bench) and tests at that scale: no such tokenizer is bundled. Its
// shape follows what large byte-level vocabularies hold: every single byte; runs of spaces,
// newlines and indentation; numbers up to three digits with and without a leading space; runs
// of code and JSON punctuation that span several grammar terminals (`":`, `"},{"`, `]]`);
// words (pseudo-words from syllables) in lower case and capitalised, with a leading space and
// with punctuation around them (`name":`, `"id`); whole CJK characters, pairs of them and
// pieces of them (partial UTF-8). Seeded: the same n and seed give the same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace mx::grammar::testing {

inline std::vector<std::string> SyntheticBpeTokens(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  std::vector<std::string> toks;
  auto add = [&](std::string s) {
    if (static_cast<int>(toks.size()) < n && !s.empty() && seen.insert(s).second)
      toks.push_back(std::move(s));
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  for (int k = 2; k <= 32; ++k) add(std::string(static_cast<size_t>(k), ' '));
  for (int k = 2; k <= 8; ++k) {
    add(std::string(static_cast<size_t>(k), '\n'));
    add(std::string(static_cast<size_t>(k), '\t'));
  }
  for (int k = 1; k <= 24; ++k) {
    add("\n" + std::string(static_cast<size_t>(k), ' '));
    add("\n\n" + std::string(static_cast<size_t>(k), ' '));
    add(std::string(static_cast<size_t>(k), ' ') + "\"");
  }
  for (int i = 0; i < 1000; ++i) {
    add(std::to_string(i));
    add(" " + std::to_string(i));
    if (i < 100) add((i < 10 ? "0" : "") + std::to_string(i));
  }
  const std::string punct = "{}[]\":,.;()<>=+-*/_!?'\\#@$%&|^~`";
  for (char a : punct) {
    for (char b : punct) {
      add(std::string{a, b});
      add(std::string{' ', a, b});
    }
  }
  for (const char* p :
       {"\":\"",   "\": \"", "\", \"",  "\",\"", "\"},{\"", "\"}, {\"", "}, {\"",  "\":[",
        "\": [",   "\":{\"", "\": {\"", "\"]}",  "\"}]",    "\"}}",     "]}",      "}}}",
        "]]]",     "\\n",    "\\\"",    "\\u00", "\\t",     "\\\\",     "true",    "false",
        "null",    " true",  " false",  " null", "true,",   "false}",   "null,",   "-0",
        ".0",      "e+",     "e-",      "\"\"",  "{}",      "[]",       "=>",      "->",
        "::",      "...",    "//",      "/*",    "*/",      "<|",       "|>",      "```",
        "```json", "\n}",    "\n]",     "\n}\n", "},\n",    "\",\n",    "\n    \""}) {
    add(p);
  }
  // Pseudo-words from syllables (an open-ended supply), with the affixes BPE learns.
  const std::vector<std::string> onset = {
      "",  "b", "c", "d",  "f",  "g",  "h",  "j",  "k",  "l",  "m",  "n",  "p",  "r",  "s",  "t",
      "v", "w", "z", "st", "tr", "pr", "ch", "th", "sh", "qu", "br", "cl", "gr", "sp", "fl", "wh"};
  const std::vector<std::string> nucleus = {"a", "e", "i", "o", "u", "ea", "ou", "io", "ai", "y"};
  const std::vector<std::string> coda = {"",   "",  "n", "r",  "s",  "t",  "l",  "nd", "ng",  "ck",
                                         "st", "m", "x", "rs", "ts", "ed", "er", "ly", "tion"};
  auto word = [&] {
    std::string w;
    const int syl = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < syl; ++k) {
      w += onset[rng() % onset.size()];
      w += nucleus[rng() % nucleus.size()];
      w += coda[rng() % coda.size()];
    }
    return w;
  };
  // CJK: whole characters (3 bytes), pairs, and a lead byte with one continuation.
  auto cjk = [&] {
    const uint32_t cp = 0x4E00 + static_cast<uint32_t>(rng() % 0x5000);
    return std::string{static_cast<char>(0xE0 | (cp >> 12)),
                       static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                       static_cast<char>(0x80 | (cp & 0x3F))};
  };
  const int n_cjk = n / 10;
  for (int k = 0; k < n_cjk; ++k) {
    std::string c = cjk();
    switch (rng() % 4) {
      case 0:
        add(c.substr(0, 2));
        break;
      case 1:
        add(c + cjk());
        break;
      default:
        add(c);
    }
  }
  for (int guard = 0; static_cast<int>(toks.size()) < n && guard < 50 * n; ++guard) {
    std::string w = word();
    if (w.empty()) continue;
    switch (rng() % 10) {
      case 0:
        w[0] = static_cast<char>(w[0] - 'a' + 'A');
        break;
      case 1:
        w = " " + w;
        w[1] = static_cast<char>(w[1] - 'a' + 'A');
        break;
      case 2:
        w += "\":";
        break;
      case 3:
        w = "\"" + w;
        break;
      case 4:
        w += (rng() % 2) ? "," : ".";
        break;
      case 5:
        w = "_" + w;
        break;
      default:
        w = " " + w;
    }
    add(w);
  }
  return toks;
}

}  // namespace mx::grammar::testing
