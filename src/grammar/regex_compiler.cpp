// Recursive-descent regex parser emitting grammar elements directly.
#include "grammar/regex_compiler.h"

#include <fmt/format.h>

#include "grammar/utf8_ranges.h"

namespace mx::grammar {

namespace {

const CodepointRanges kDigit = {{'0', '9'}};
const CodepointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodepointRanges kSpace = {{'\t', '\r'}, {' ', ' '}};

// Decodes one UTF-8 code point at s[*i]; false on malformed input.
bool DecodeUtf8(std::string_view s, size_t* i, uint32_t* c) {
  const auto b0 = static_cast<uint8_t>(s[*i]);
  int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (n == 0 || *i + n > s.size()) return false;
  uint32_t v = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(s[*i + k]);
    if ((b & 0xC0) != 0x80) return false;
    v = (v << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[n] || v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) return false;
  *i += n;
  *c = v;
  return true;
}

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view p, const RegexOptions& o)
      : b_(b), p_(p), opt_(o) {}

  Status Run(Seq* out) {
    if (!p_.empty() && p_[0] == '^') ++i_;
    Seq s;
    ParseAlt(&s, 0);
    if (st_.ok() && i_ < p_.size()) Error("unbalanced ')'");
    if (!st_.ok()) return st_;
    out->insert(out->end(), s.begin(), s.end());
    return b_.status();
  }

 private:
  void Error(std::string_view what) {
    if (st_.ok()) st_ = InvalidArgument("regex: {} at offset {}", what, i_);
  }
  void Unsupported(std::string_view what) {
    if (st_.ok()) st_ = Unimplemented("regex: {} at offset {} is not supported", what, i_);
  }
  bool AtEnd() const { return i_ >= p_.size(); }
  // `$` closing the whole pattern (or a top-level alternative) is an anchor, and a no-op.
  bool AtFinalDollar() const { return p_[i_] == '$' && i_ + 1 == p_.size(); }

  void ParseAlt(Seq* out, int depth) {
    if (depth > b_.limits().max_depth) return Error("groups nested too deeply");
    std::vector<Seq> alts(1);
    while (st_.ok() && !AtEnd() && p_[i_] != ')') {
      if (p_[i_] == '|') {
        ++i_;
        alts.emplace_back();
        continue;
      }
      if (AtFinalDollar()) {
        ++i_;
        continue;
      }
      ParseQuantified(&alts.back(), depth);
    }
    if (alts.size() == 1) {
      out->insert(out->end(), alts[0].begin(), alts[0].end());
    } else {
      out->push_back(b_.Alt(std::move(alts), "re_alt"));
    }
  }

  void ParseQuantified(Seq* out, int depth) {
    Seq atom;
    ParseAtom(&atom, depth);
    if (!st_.ok() || AtEnd()) {
      out->insert(out->end(), atom.begin(), atom.end());
      return;
    }
    int32_t min = 1, max = 1;
    const char q = p_[i_];
    if (q == '*' || q == '+' || q == '?') {
      ++i_;
      min = q == '+' ? 1 : 0;
      max = q == '?' ? 1 : -1;
    } else if (q == '{' && ParseBraces(&min, &max)) {
    } else {
      out->insert(out->end(), atom.begin(), atom.end());
      return;
    }
    if (!st_.ok()) return;
    if (!AtEnd() && p_[i_] == '?') ++i_;  // lazy: the same language
    if (!AtEnd() && p_[i_] == '+') return Unsupported("a possessive quantifier");
    if (!AtEnd() && (p_[i_] == '*' || p_[i_] == '{')) return Error("a quantifier follows another");
    if (atom.empty()) return Error("a quantifier follows nothing");
    out->push_back(b_.Repeat(atom, min, max, "re_rep"));
  }

  // {n}, {n,}, {n,m}; false (nothing consumed) when the brace is a literal.
  bool ParseBraces(int32_t* min, int32_t* max) {
    size_t j = i_ + 1;
    auto number = [&](int64_t* v) {
      const size_t s = j;
      *v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && j - s < 9)
        *v = *v * 10 + (p_[j++] - '0');
      return j > s;
    };
    int64_t lo = 0, hi = 0;
    if (!number(&lo)) return false;
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(&hi)) hi = -1;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    *min = static_cast<int32_t>(lo);
    *max = static_cast<int32_t>(hi);
    if (hi >= 0 && hi < lo) Error("a repetition {n,m} with m < n");
    return true;
  }

  void ParseAtom(Seq* out, int depth) {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (p_.substr(i_, 3) == "?P<" || (p_.substr(i_, 2) == "?<" && i_ + 2 < p_.size() &&
                                               p_[i_ + 2] != '=' && p_[i_ + 2] != '!')) {
        const size_t close = p_.find('>', i_);
        if (close == std::string_view::npos) return Error("an unterminated group name");
        i_ = close + 1;
      } else if (!AtEnd() && p_[i_] == '?') {
        return Unsupported("lookaround or a group flag '(?'");
      }
      ParseAlt(out, depth + 1);
      if (AtEnd() || p_[i_] != ')') return Error("a missing ')'");
      ++i_;
      return;
    }
    if (c == '[') return out->push_back(CharSetElem(b_, ParseClass(), opt_.json_string));
    if (c == '.') {
      ++i_;
      // ECMAScript's (JSON Schema's) dot: anything but a line terminator.
      return out->push_back(CharSetElem(
          b_, Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}), opt_.json_string));
    }
    if (c == '*' || c == '+' || c == '?') return Error("a quantifier follows nothing");
    if (c == '^') return Unsupported("'^' inside the pattern");
    if (c == '$') return Unsupported("'$' inside the pattern");
    CodepointRanges set;
    if (c == '\\') {
      set = ParseEscape(/*in_class=*/false);
    } else {
      uint32_t cp = 0;
      if (!DecodeUtf8(p_, &i_, &cp)) return Error("malformed UTF-8");
      set = {{cp, cp}};
    }
    if (st_.ok()) out->push_back(CharSetElem(b_, set, opt_.json_string));
  }

  // After a backslash (at p_[i_]); returns the code points it stands for.
  CodepointRanges ParseEscape(bool in_class) {
    ++i_;
    if (AtEnd()) {
      Error("a trailing backslash");
      return {};
    }
    const char e = p_[i_++];
    auto hex = [&](size_t n, bool braced) -> CodepointRanges {
      uint32_t v = 0;
      size_t k = 0;
      for (; i_ < p_.size() && (braced ? p_[i_] != '}' : k < n); ++k, ++i_) {
        const char h = p_[i_];
        const int d = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (d < 0 || k >= 6) {
          Error("a bad hexadecimal escape");
          return {};
        }
        v = v * 16 + static_cast<uint32_t>(d);
      }
      if (braced) {
        if (AtEnd()) {
          Error("an unterminated \\x{...}");
          return {};
        }
        ++i_;
      }
      if ((!braced && k != n) || k == 0 || v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
        Error("a bad hexadecimal escape");
        return {};
      }
      return {{v, v}};
    };
    switch (e) {
      case 'd':
        return kDigit;
      case 'D':
        return Complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return Complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return Complement(kSpace);
      case 'n':
        return {{'\n', '\n'}};
      case 't':
        return {{'\t', '\t'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'x':
        if (!AtEnd() && p_[i_] == '{') {
          ++i_;
          return hex(0, true);
        }
        return hex(2, false);
      case 'u':
        return hex(4, false);
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        Unsupported("a word boundary \\b");
        return {};
      default:
        break;
    }
    if (e >= '1' && e <= '9') {
      Unsupported("a backreference");
      return {};
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      Unsupported(fmt::format("the escape \\{}", e));
      return {};
    }
    --i_;
    uint32_t cp = 0;
    if (!DecodeUtf8(p_, &i_, &cp)) Error("malformed UTF-8");
    return {{cp, cp}};
  }

  CodepointRanges ParseClass() {
    ++i_;  // '['
    bool negate = false;
    if (!AtEnd() && p_[i_] == '^') {
      negate = true;
      ++i_;
    }
    CodepointRanges set;
    bool first = true;
    while (st_.ok()) {
      if (AtEnd()) {
        Error("an unterminated '['");
        return {};
      }
      if (p_[i_] == ']' && !first) break;
      if (p_.substr(i_, 2) == "[:") {
        Unsupported("a POSIX class [:...:]");
        return {};
      }
      first = false;
      CodepointRanges lo = ClassAtom();
      if (!st_.ok()) return {};
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']' && lo.size() == 1 &&
          lo[0].first == lo[0].second) {
        ++i_;
        CodepointRanges hi = ClassAtom();
        if (!st_.ok()) return {};
        if (hi.size() != 1 || hi[0].first != hi[0].second || hi[0].first < lo[0].first) {
          Error("a bad range in '[...]'");
          return {};
        }
        set.push_back({lo[0].first, hi[0].first});
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    ++i_;  // ']'
    return negate ? Complement(set) : Normalize(set);
  }

  CodepointRanges ClassAtom() {
    if (p_[i_] == '\\') return ParseEscape(/*in_class=*/true);
    uint32_t cp = 0;
    if (!DecodeUtf8(p_, &i_, &cp)) {
      Error("malformed UTF-8");
      return {};
    }
    return {{cp, cp}};
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexOptions opt_;
  size_t i_ = 0;
  Status st_;
};

}  // namespace

Elem CharSetElem(GrammarBuilder& b, const CodepointRanges& r, bool json_string) {
  if (!json_string) return CodepointSet(b, r);
  // Raw: everything but controls, '"' and '\'; those are written as JSON escapes.
  CodepointRanges raw;
  std::vector<Seq> alts;
  for (auto [lo, hi] : Normalize(r)) {
    for (uint32_t c = lo; c <= hi && c < 0x20; ++c) {
      static constexpr const char* kShort[] = {"b", "t", "n", nullptr, "f", "r"};
      const char* s = c >= 8 && c <= 13 ? kShort[c - 8] : nullptr;
      alts.push_back(
          b.Literal(s != nullptr ? fmt::format("\\{}", s) : fmt::format("\\u{:04x}", c)));
    }
    if (lo <= '"' && '"' <= hi) alts.push_back(b.Literal("\\\""));
    if (lo <= '\\' && '\\' <= hi) alts.push_back(b.Literal("\\\\"));
    if (hi >= 0x20) raw.push_back({std::max<uint32_t>(lo, 0x20), hi});
  }
  raw = Normalize(raw);
  CodepointRanges keep;
  for (auto [lo, hi] : raw) {
    for (uint32_t cut : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (lo <= cut && cut <= hi) {
        if (lo < cut) keep.push_back({lo, cut - 1});
        lo = cut + 1;
      }
    }
    if (lo <= hi && hi >= 0x20) keep.push_back({lo, hi});
  }
  keep = Normalize(keep);
  if (!keep.empty()) alts.push_back({CodepointSet(b, keep)});
  if (alts.empty()) {
    b.Fail(InvalidArgument("a character class matches no character"));
    return b.Alt({{}});
  }
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return b.Alt(std::move(alts), "jchar");
}

Status CompileRegex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& opt,
                    Seq* out) {
  if (static_cast<int64_t>(pattern.size()) > b.limits().max_source_bytes) {
    return ResourceExhausted("regex: {} bytes is over the limit {}", pattern.size(),
                             b.limits().max_source_bytes);
  }
  return RegexParser(b, pattern, opt).Run(out);
}

Result<Grammar> RegexGrammar(std::string_view pattern, const GrammarLimits& limits) {
  GrammarBuilder b(limits);
  const uint32_t root = b.NewRule("root");
  Seq s;
  MX_RETURN_IF_ERROR(CompileRegex(b, pattern, {}, &s));
  b.AddAlt(root, std::move(s));
  return b.Finish(root);
}

}  // namespace mx::grammar
