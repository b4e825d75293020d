// GBNF parser: names first (so rules may be used before they are defined), then bodies.
#include "grammar/ebnf_compiler.h"

#include <map>

#include <fmt/format.h>

#include "grammar/regex_compiler.h"
#include "grammar/utf8_ranges.h"

namespace mx::grammar {

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

class EbnfParser {
 public:
  EbnfParser(GrammarBuilder& b, std::string_view t) : b_(b), t_(t) {}

  Result<Grammar> Run() {
    // Pass 1: every `name ::=` (a name at the start of a rule).
    std::vector<std::pair<std::string, size_t>> heads;  // name, body start
    for (i_ = 0; SkipSpace(), !AtEnd();) {
      const size_t at = i_;
      std::string name = Name();
      SkipSpace();
      if (!name.empty() && t_.substr(i_, 3) == "::=") {
        i_ += 3;
        if (names_.count(name) != 0)
          return Err(at, fmt::format("rule '{}' is defined twice", name));
        names_[name] = b_.NewRule(name);
        heads.push_back({name, i_});
        continue;
      }
      if (heads.empty()) return Err(at, "expected 'name ::='");
      SkipToken();
    }
    if (heads.empty()) return InvalidArgument("ebnf: the grammar has no rules");
    if (names_.count("root") == 0) return InvalidArgument("ebnf: there is no rule named 'root'");
    // Pass 2: bodies, each up to the next head.
    for (size_t h = 0; h < heads.size(); ++h) {
      i_ = heads[h].second;
      end_ = h + 1 < heads.size() ? HeadStart(heads[h + 1].second) : t_.size();
      std::vector<Seq> alts;
      ParseAlts(&alts, 0);
      if (!st_.ok()) return st_;
      SkipSpace();
      if (i_ < end_) return Err(i_, "unexpected text");
      for (Seq& a : alts) b_.AddAlt(names_[heads[h].first], std::move(a));
    }
    MX_RETURN_IF_ERROR(b_.status());
    return b_.Finish(names_["root"]);
  }

 private:
  // The start of the head whose body begins at `body`: back over `::=`, spaces and the name.
  size_t HeadStart(size_t body) const {
    size_t j = body - 3;
    while (j > 0 && (t_[j - 1] == ' ' || t_[j - 1] == '\t')) --j;
    while (j > 0 && IsNameChar(t_[j - 1])) --j;
    return j;
  }
  bool AtEnd() const { return i_ >= t_.size(); }
  bool AtBodyEnd() const { return i_ >= end_; }
  size_t Line(size_t at) const {
    size_t n = 1;
    for (size_t k = 0; k < at && k < t_.size(); ++k) n += t_[k] == '\n';
    return n;
  }
  Status Err(size_t at, std::string_view what) {
    return InvalidArgument("ebnf line {}: {}", Line(at), what);
  }
  void Fail(size_t at, std::string_view what) {
    if (st_.ok()) st_ = Err(at, what);
  }
  void SkipSpace() {
    while (!AtEnd()) {
      if (t_[i_] == '#') {
        while (!AtEnd() && t_[i_] != '\n') ++i_;
      } else if (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r') {
        ++i_;
      } else {
        break;
      }
    }
  }
  std::string Name() {
    const size_t s = i_;
    while (!AtEnd() && IsNameChar(t_[i_])) ++i_;
    return std::string(t_.substr(s, i_ - s));
  }
  // Pass 1: past one token of a body (a string or class is skipped whole).
  void SkipToken() {
    const char c = t_[i_];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      for (++i_; !AtEnd() && t_[i_] != close; ++i_) {
        if (t_[i_] == '\\') ++i_;
      }
      if (!AtEnd()) ++i_;
    } else if (IsNameChar(c)) {
      Name();
    } else {
      ++i_;
    }
  }

  void ParseAlts(std::vector<Seq>* alts, int depth) {
    if (depth > b_.limits().max_depth) return Fail(i_, "groups nested too deeply");
    alts->emplace_back();
    while (st_.ok()) {
      SkipSpace();
      if (AtBodyEnd() || t_[i_] == ')') return;
      if (t_[i_] == '|') {
        ++i_;
        alts->emplace_back();
        continue;
      }
      ParsePostfix(&alts->back(), depth);
    }
  }

  void ParsePostfix(Seq* out, int depth) {
    Seq atom;
    ParseAtom(&atom, depth);
    if (!st_.ok()) return;
    while (!AtBodyEnd()) {
      const char q = t_[i_];
      int32_t lo = 0, hi = -1;
      if (q == '*' || q == '+' || q == '?') {
        ++i_;
        lo = q == '+' ? 1 : 0;
        hi = q == '?' ? 1 : -1;
      } else if (q == '{') {
        if (!Braces(&lo, &hi)) return;
      } else {
        break;
      }
      atom = {b_.Repeat(atom, lo, hi, "ebnf_rep")};
    }
    out->insert(out->end(), atom.begin(), atom.end());
  }

  bool Braces(int32_t* lo, int32_t* hi) {
    const size_t at = i_++;
    auto num = [&](int32_t* v) {
      const size_t s = i_;
      int64_t x = 0;
      while (!AtBodyEnd() && t_[i_] >= '0' && t_[i_] <= '9' && i_ - s < 9)
        x = x * 10 + (t_[i_++] - '0');
      *v = static_cast<int32_t>(x);
      return i_ > s;
    };
    if (!num(lo)) {
      Fail(at, "expected a number after '{'");
      return false;
    }
    *hi = *lo;
    if (!AtBodyEnd() && t_[i_] == ',') {
      ++i_;
      if (!num(hi)) *hi = -1;
    }
    if (AtBodyEnd() || t_[i_] != '}') {
      Fail(at, "expected '}'");
      return false;
    }
    ++i_;
    return true;
  }

  void ParseAtom(Seq* out, int depth) {
    const size_t at = i_;
    const char c = t_[i_];
    if (c == '(') {
      ++i_;
      std::vector<Seq> alts;
      ParseAlts(&alts, depth + 1);
      if (!st_.ok()) return;
      if (AtBodyEnd() || t_[i_] != ')') return Fail(at, "a '(' is not closed");
      ++i_;
      if (alts.size() == 1) {
        *out = std::move(alts[0]);
      } else {
        out->push_back(b_.Alt(std::move(alts), "ebnf_group"));
      }
      return;
    }
    if (c == '"') return Literal(out);
    if (c == '[') {
      size_t j = i_ + 1;
      if (j < end_ && t_[j] == '^') ++j;
      if (j < end_ && t_[j] == ']') ++j;  // a leading ']' is literal
      for (; j < end_ && t_[j] != ']'; ++j) {
        if (t_[j] == '\\') ++j;
      }
      if (j >= end_) return Fail(at, "a '[' is not closed");
      const std::string_view cls = t_.substr(i_, j + 1 - i_);
      i_ = j + 1;
      const Status s = CompileRegex(b_, cls, {}, out);
      if (!s.ok()) Fail(at, s.message());
      return;
    }
    if (IsNameChar(c)) {
      const std::string name = Name();
      auto it = names_.find(name);
      if (it == names_.end()) return Fail(at, fmt::format("rule '{}' is not defined", name));
      out->push_back(b_.Ref(it->second));
      return;
    }
    Fail(at, fmt::format("unexpected '{}'", c));
  }

  void Literal(Seq* out) {
    const size_t at = i_++;
    std::string bytes;
    while (true) {
      if (AtBodyEnd() || t_[i_] == '\n') return Fail(at, "a string is not closed");
      const char c = t_[i_++];
      if (c == '"') break;
      if (c != '\\') {
        bytes.push_back(c);
        continue;
      }
      if (AtBodyEnd()) return Fail(at, "a string is not closed");
      const char e = t_[i_++];
      switch (e) {
        case 'n':
          bytes.push_back('\n');
          break;
        case 't':
          bytes.push_back('\t');
          break;
        case 'r':
          bytes.push_back('\r');
          break;
        case '\\':
          bytes.push_back('\\');
          break;
        case '"':
          bytes.push_back('"');
          break;
        case '\'':
          bytes.push_back('\'');
          break;
        case '[':
          bytes.push_back('[');
          break;
        case ']':
          bytes.push_back(']');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (size_t k = 0; k < n; ++k, ++i_) {
            const char h = AtBodyEnd() ? 'g' : t_[i_];
            const int d = h >= '0' && h <= '9'   ? h - '0'
                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                 : -1;
            if (d < 0) return Fail(at, "a bad hexadecimal escape");
            v = v * 16 + static_cast<uint32_t>(d);
          }
          if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
            return Fail(at, "an escape that is not a Unicode scalar value");
          }
          AppendUtf8(v, &bytes);
          break;
        }
        default:
          return Fail(at, fmt::format("unknown escape '\\{}'", e));
      }
    }
    b_.AppendLiteral(bytes, out);
  }

  GrammarBuilder& b_;
  std::string_view t_;
  size_t i_ = 0;
  size_t end_ = 0;
  std::map<std::string, uint32_t> names_;
  Status st_;
};

}  // namespace

Result<Grammar> EbnfGrammar(std::string_view text, const GrammarLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_source_bytes) {
    return ResourceExhausted("ebnf: {} bytes is over the limit {}", text.size(),
                             limits.max_source_bytes);
  }
  GrammarBuilder b(limits);
  return EbnfParser(b, text).Run();
}

}  // namespace mx::grammar
