// GrammarBuilder: rules, repetition as rules, the left-recursion check and the flat layout.
#include "grammar/grammar.h"

#include <map>

#include <fmt/format.h>

namespace mx::grammar {

namespace {

std::string ClassToString(const ByteClass& c) {
  std::string s = "[";
  for (int b = 0; b < 256; ++b) {
    if (!c.Has(static_cast<uint8_t>(b))) continue;
    int e = b;
    while (e + 1 < 256 && c.Has(static_cast<uint8_t>(e + 1))) ++e;
    auto one = [](int x) {
      return (x > 0x20 && x < 0x7f && x != '\\' && x != ']' && x != '-')
                 ? std::string(1, static_cast<char>(x))
                 : fmt::format("\\x{:02x}", x);
    };
    s += one(b);
    if (e > b) s += "-" + one(e);
    b = e;
  }
  return s + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (size_t r = 0; r < rule_alts.size(); ++r) {
    for (uint32_t start : rule_alts[r]) {
      out += fmt::format("{}{} ::=", rule_names[r], r == root ? " (root)" : "");
      for (uint32_t p = start; elems[p].kind != Elem::kEnd; ++p) {
        const Elem& e = elems[p];
        out += " " + (e.kind == Elem::kClass ? ClassToString(classes[e.id]) : rule_names[e.id]);
      }
      out += "\n";
    }
  }
  return out;
}

uint32_t GrammarBuilder::NewRule(std::string name) {
  if (static_cast<int64_t>(rules_.size()) >= limits_.max_rules) {
    Fail(ResourceExhausted("the grammar needs more than {} rules (limit)", limits_.max_rules));
    return 0;  // a valid index whose use is harmless: the build has failed
  }
  rules_.emplace_back();
  names_.push_back(fmt::format("{}_{}", name, rules_.size() - 1));
  return static_cast<uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::AddAlt(uint32_t rule, Seq seq) {
  if (!status_.ok()) return;
  n_elems_ += static_cast<int64_t>(seq.size()) + 1;
  if (n_elems_ > limits_.max_elements) {
    Fail(
        ResourceExhausted("the grammar needs more than {} elements (limit)", limits_.max_elements));
    return;
  }
  rules_[rule].push_back(std::move(seq));
}

Elem GrammarBuilder::Class(const ByteClass& c) {
  for (size_t i = classes_.size(); i-- > 0 && i + 64 >= classes_.size();) {
    if (classes_[i] == c) return {Elem::kClass, static_cast<uint32_t>(i)};  // recent reuse
  }
  classes_.push_back(c);
  return {Elem::kClass, static_cast<uint32_t>(classes_.size() - 1)};
}

Elem GrammarBuilder::Byte(uint8_t b) {
  ByteClass c;
  c.Add(b);
  return Class(c);
}

void GrammarBuilder::AppendLiteral(std::string_view s, Seq* seq) {
  for (char ch : s) seq->push_back(Byte(static_cast<uint8_t>(ch)));
}

Elem GrammarBuilder::Alt(std::vector<Seq> alts, std::string name) {
  const uint32_t r = NewRule(std::move(name));
  for (Seq& a : alts) AddAlt(r, std::move(a));
  return Ref(r);
}

Elem GrammarBuilder::Star(Seq x, std::string name) {
  const uint32_t r = NewRule(std::move(name));
  x.push_back(Ref(r));  // right recursion: a tail call, so the matcher's stack stays flat
  AddAlt(r, std::move(x));
  AddAlt(r, {});
  return Ref(r);
}

Elem GrammarBuilder::Repeat(const Seq& x, int32_t min, int32_t max, std::string name) {
  if (min < 0 || (max >= 0 && max < min)) {
    Fail(InvalidArgument("repetition {{{},{}}}: the bounds are out of order", min, max));
    return Alt({{}});
  }
  if (min > limits_.max_repeat || max > limits_.max_repeat) {
    Fail(ResourceExhausted("repetition bound {} is over the limit {}", std::max(min, max),
                           limits_.max_repeat));
    return Alt({{}});
  }
  // One element stands for x, so copies cost one element each.
  const Elem item = x.size() == 1 ? x[0] : Alt({x}, name + "_item");
  Seq seq(static_cast<size_t>(min), item);
  if (max < 0) {
    seq.push_back(Star({item}, name + "_star"));
  } else if (max > min) {
    uint32_t tail = NewRule(name + "_opt");  // item?
    AddAlt(tail, {item});
    AddAlt(tail, {});
    for (int32_t k = min + 1; k < max && status_.ok(); ++k) {
      const uint32_t r = NewRule(name + "_opt");  // (item tail)?
      AddAlt(r, {item, Ref(tail)});
      AddAlt(r, {});
      tail = r;
    }
    seq.push_back(Ref(tail));
  }
  return Alt({std::move(seq)}, std::move(name));
}

Elem GrammarBuilder::SeparatedList(const Seq& x, const Seq& sep, int32_t min, int32_t max,
                                   std::string name) {
  if (max == 0) return Alt({{}}, std::move(name));
  const Elem item = x.size() == 1 ? x[0] : Alt({x}, name + "_item");
  Seq more = sep;
  more.push_back(item);
  const Elem rest = Repeat(more, std::max(min, 1) - 1, max < 0 ? -1 : max - 1, name + "_more");
  std::vector<Seq> alts;
  if (min == 0) alts.push_back({});
  alts.push_back({item, rest});
  return Alt(std::move(alts), std::move(name));
}

Result<Grammar> GrammarBuilder::Finish(uint32_t root) {
  if (!status_.ok()) return status_;
  const size_t n = rules_.size();
  if (root >= n) return InvalidArgument("the grammar has no root rule");
  for (size_t r = 0; r < n; ++r) {
    if (rules_[r].empty()) return InvalidArgument("rule '{}' has no alternatives", names_[r]);
  }
  // Nullable rules (fixpoint), then the left-corner graph must be acyclic.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Seq& a : rules_[r]) {
        bool all = true;
        for (const Elem& e : a) all = all && e.kind == Elem::kRef && nullable[e.id];
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Seq& a : rules_[r]) {
      for (const Elem& e : a) {
        if (e.kind != Elem::kRef) break;
        left[r].push_back(e.id);
        if (!nullable[e.id]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
  std::vector<std::pair<uint32_t, size_t>> dfs;
  for (uint32_t s = 0; s < n; ++s) {
    if (color[s]) continue;
    dfs.push_back({s, 0});
    color[s] = 1;
    while (!dfs.empty()) {
      auto& [r, i] = dfs.back();
      if (i == left[r].size()) {
        color[r] = 2;
        dfs.pop_back();
        continue;
      }
      const uint32_t next = left[r][i++];
      if (color[next] == 1) {
        return InvalidArgument("rule '{}' is left-recursive (through '{}')", names_[next],
                               names_[r]);
      }
      if (color[next] == 0) {
        color[next] = 1;
        dfs.push_back({next, 0});
      }
    }
  }
  Grammar g;
  g.classes = std::move(classes_);
  g.rule_names = std::move(names_);
  g.rule_alts.resize(n);
  g.elems.reserve(static_cast<size_t>(n_elems_));
  for (size_t r = 0; r < n; ++r) {
    for (const Seq& a : rules_[r]) {
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.elems.size()));
      g.elems.insert(g.elems.end(), a.begin(), a.end());
      g.elems.push_back({Elem::kEnd, 0});
    }
  }
  g.root = root;
  return g;
}

}  // namespace mx::grammar
