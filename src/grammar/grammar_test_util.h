// Helpers for the grammar tests: whole-string matching and random walks through a grammar's
// language (each step a uniformly chosen allowed byte, ending with probability p_end when the
// grammar may end).
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace mx::grammar::testing {

inline std::shared_ptr<const Grammar> Share(Result<Grammar> g) {
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

inline bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  Matcher m(g);
  return m.AcceptBytes(s) && m.CanEnd();
}

// A random string of the language, or nullopt when max_bytes passed first. With probability
// p_prefer a step picks among the allowed bytes of `prefer` (when there are any): closing
// bytes, so that walks through nested JSON end.
inline std::optional<std::string> RandomWalk(const std::shared_ptr<const Grammar>& g,
                                             std::mt19937_64& rng, size_t max_bytes, double p_end,
                                             std::string_view prefer = {}, double p_prefer = 0) {
  Matcher m(g);
  std::string out;
  std::uniform_real_distribution<double> u(0, 1);
  while (out.size() < max_bytes) {
    if (m.Complete() || (m.CanEnd() && u(rng) < p_end)) return out;
    std::vector<uint8_t> ok;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      if (m.CanAccept(std::string_view(&c, 1))) ok.push_back(static_cast<uint8_t>(b));
    }
    if (ok.empty()) return std::nullopt;  // a dead end: the matcher's states must never allow one
    std::vector<uint8_t> pref;
    for (uint8_t b : ok) {
      if (prefer.find(static_cast<char>(b)) != std::string_view::npos) pref.push_back(b);
    }
    const std::vector<uint8_t>& from = !pref.empty() && u(rng) < p_prefer ? pref : ok;
    const char c = static_cast<char>(from[rng() % from.size()]);
    if (!m.AcceptBytes(std::string_view(&c, 1))) return std::nullopt;
    out.push_back(c);
  }
  return std::nullopt;
}

}  // namespace mx::grammar::testing
