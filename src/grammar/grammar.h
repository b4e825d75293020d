// The grammar IR every constraint compiles into: rules, each a list of alternatives, each a
// sequence of elements that are either a byte class (a set of bytes) or a reference to a rule.
// Repetition and optional parts are rules of their own (GrammarBuilder writes them), so the
// matcher (matcher.h) runs one small pushdown machine over bytes whatever the source was.
// Text is matched as UTF-8 bytes: a code point class becomes alternatives of byte sequences
// (utf8_ranges.h).
//
// Limits: every builder counts what it makes; past GrammarLimits the compile fails with
// ResourceExhausted naming the limit, so hostile constraints cost bounded memory and time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mx::grammar {

// A set of bytes (bit b of word b / 64).
struct ByteClass {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool Empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteClass&) const = default;
};

struct Elem {
  enum Kind : uint8_t { kClass, kRef, kEnd };
  Kind kind = kEnd;
  uint32_t id = 0;  // class index (kClass) or rule index (kRef)
};

// One alternative: a sequence of class / ref elements.
using Seq = std::vector<Elem>;

struct GrammarLimits {
  int64_t max_elements = 200000;  // class and ref elements in all rules
  int64_t max_rules = 50000;
  int32_t max_repeat = 10000;  // a bounded repetition's upper bound (maxLength, {m,n})
  int32_t max_depth = 64;      // nesting in the source (schema objects, regex groups)
  int64_t max_source_bytes = 1 << 20;
};

// The compiled, flat form the matcher runs. Alternatives are laid out in `elems`, each ended
// by a kEnd element; rule r's alternatives start at rule_alts[r][...].
struct Grammar {
  std::vector<ByteClass> classes;
  std::vector<Elem> elems;
  std::vector<std::vector<uint32_t>> rule_alts;
  std::vector<std::string> rule_names;
  uint32_t root = 0;

  // Human-readable listing (tests, debugging): one line per alternative.
  std::string ToString() const;
};

// Writes rules. Every helper returns an element to place in a sequence; helpers that need a
// rule of their own (alternatives, repetition) make one. Errors (a limit passed) are sticky:
// status() reports the first, and Finish fails with it.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarLimits& limits = {}) : limits_(limits) {}

  // A new rule with no alternatives yet (for recursion: reference it, fill it later).
  uint32_t NewRule(std::string name);
  void AddAlt(uint32_t rule, Seq seq);
  Elem Ref(uint32_t rule) const { return {Elem::kRef, rule}; }

  Elem Class(const ByteClass& c);
  Elem Byte(uint8_t b);
  // The bytes of `s`, appended to *seq.
  void AppendLiteral(std::string_view s, Seq* seq);
  Seq Literal(std::string_view s) {
    Seq q;
    AppendLiteral(s, &q);
    return q;
  }
  // A rule with these alternatives (an empty Seq is the empty string).
  Elem Alt(std::vector<Seq> alts, std::string name = "alt");
  // x*, x+, x?, x{min,max} (max < 0: unbounded).
  Elem Star(Seq x, std::string name = "star");
  Elem Repeat(const Seq& x, int32_t min, int32_t max, std::string name = "rep");
  // x{min,max} with `sep` between items: (x (sep x){min-1,max-1})? when min == 0.
  Elem SeparatedList(const Seq& x, const Seq& sep, int32_t min, int32_t max, std::string name);

  const Status& status() const { return status_; }
  void Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const GrammarLimits& limits() const { return limits_; }

  // Checks every rule has an alternative, no rule is left-recursive (directly or through
  // nullable prefixes; the matcher expands rules top-down), and lays the rules out.
  Result<Grammar> Finish(uint32_t root);

 private:
  GrammarLimits limits_;
  std::vector<ByteClass> classes_;
  std::vector<std::vector<Seq>> rules_;
  std::vector<std::string> names_;
  int64_t n_elems_ = 0;
  Status status_;
};

}  // namespace mx::grammar
