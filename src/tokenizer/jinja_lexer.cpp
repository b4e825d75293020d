// A hand-written equivalent of jinja2.lexer.Lexer.tokeniter (Jinja 3.1).
#include "tokenizer/jinja_lexer.h"

#include <cstring>

#include "tokenizer/jinja_unicode.h"

namespace mx::jinja {
namespace {

// Matches Python's `\s` at s[pos]; returns its length in bytes, 0 if none.
size_t SpaceAt(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return IsPySpace(c) ? 1 : 0;
  size_t p = pos;
  char32_t cp = DecodeUtf8At(s, &p);
  return IsPySpace(cp) ? p - pos : 0;
}

size_t SkipSpaces(std::string_view s, size_t pos) {
  while (size_t n = SpaceAt(s, pos)) pos += n;
  return pos;
}

// Length of s without trailing Python whitespace (str.rstrip()).
size_t RStripLen(std::string_view s) {
  // Walk forward remembering the end of the last non-space code point.
  size_t pos = 0, keep = 0;
  while (pos < s.size()) {
    size_t n = SpaceAt(s, pos);
    if (n) {
      pos += n;
    } else {
      DecodeUtf8At(s, &pos);
      keep = pos;
    }
  }
  return keep;
}

bool AllSpaces(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = SpaceAt(s, pos);
    if (!n) return false;
    pos += n;
  }
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

class Lexer {
 public:
  Lexer(std::string source, std::string_view name, const LexOptions& options)
      : src_(std::move(source)), name_(name), opt_(options) {}

  Result<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      // Find the next "{{", "{%" or "{#".
      size_t p = pos;
      size_t start = std::string::npos;
      while ((p = src_.find('{', p)) != std::string::npos) {
        if (p + 1 < src_.size() &&
            (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
          start = p;
          break;
        }
        ++p;
      }
      if (start == std::string::npos) {
        Emit(Tok::kData, src_.substr(pos), pos);
        break;
      }
      const char kind = src_[start + 1];
      size_t after = start + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];

      // `{% raw %}` is tried first.
      size_t raw_end = 0;
      const bool is_raw = kind == '%' && MatchRawBegin(start, &raw_end);

      std::string_view text(src_.data() + pos, start - pos);
      text = ApplyLStrip(text, sign, kind != '{', line_starting);
      if (!text.empty()) Emit(Tok::kData, std::string(text), pos);

      if (is_raw) {
        MX_ASSIGN_OR_RETURN(pos, LexRaw(start, raw_end, &line_starting));
        continue;
      }
      if (kind == '#') {
        MX_ASSIGN_OR_RETURN(pos, LexComment(start, after, &line_starting));
        continue;
      }
      MX_ASSIGN_OR_RETURN(pos, LexTag(start, after, kind, &line_starting));
    }
    tokens_.push_back(Token{Tok::kEof, "", 0, 0});
    SetPos(&tokens_.back(), src_.size());
    return std::move(tokens_);
  }

  Status Error(size_t pos, const std::string& message) const {
    int line = 1, col = 1;
    LineCol(pos, &line, &col);
    return InvalidArgument("{}:{}:{}: {}", name_, line, col, message);
  }

 private:
  void LineCol(size_t pos, int* line, int* col) const {
    // Incremental: tokens are emitted in order, so continue from the last query.
    if (pos < lc_pos_) {
      lc_pos_ = 0;
      lc_line_ = 1;
      lc_col_ = 1;
    }
    for (size_t i = lc_pos_; i < pos && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++lc_line_;
        lc_col_ = 1;
      } else if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) {
        ++lc_col_;
      }
    }
    lc_pos_ = pos;
    *line = lc_line_;
    *col = lc_col_;
  }

  void SetPos(Token* t, size_t pos) { LineCol(pos, &t->line, &t->col); }

  void Emit(Tok type, std::string text, size_t pos) {
    tokens_.push_back(Token{type, std::move(text), 1, 1});
    SetPos(&tokens_.back(), pos);
  }

  // The text before a tag, after `-` stripping or lstrip_blocks.
  std::string_view ApplyLStrip(std::string_view text, char sign, bool lstrip_applies,
                               bool line_starting) const {
    if (sign == '-') return text.substr(0, RStripLen(text));
    if (sign != '+' && opt_.lstrip_blocks && lstrip_applies) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        std::string_view tail = text.substr(l_pos);
        if (!tail.empty() && AllSpaces(tail)) return text.substr(0, l_pos);
      }
    }
    return text;
  }

  // Matches a block end at pos: `+%}` | `-%}\s*` | `%}\n?` (or the `}}`/`#}` variants).
  // Returns the end of the match, or npos.
  size_t MatchEnd(size_t pos, char closer, bool trim) const {
    auto at = [&](size_t p, const char* s) {
      size_t n = std::strlen(s);
      return p + n <= src_.size() && src_.compare(p, n, s) == 0;
    };
    const char end[3] = {closer, '}', 0};
    if (closer != '}' && at(pos, "+") && at(pos + 1, end)) return pos + 3;
    if (at(pos, "-") && at(pos + 1, end)) return SkipSpaces(src_, pos + 3);
    if (at(pos, end)) {
      size_t e = pos + 2;
      if (trim && opt_.trim_blocks && e < src_.size() && src_[e] == '\n') ++e;
      return e;
    }
    return std::string::npos;
  }

  bool MatchRawBegin(size_t start, size_t* end) const {
    size_t p = start + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpaces(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      *end = SkipSpaces(src_, p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *end = p + 2;
      return true;
    }
    return false;
  }

  Result<size_t> LexRaw(size_t start, size_t body, bool* line_starting) {
    *line_starting = src_[body - 1] == '\n';
    size_t p = body;
    while ((p = src_.find("{%", p)) != std::string::npos) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = SkipSpaces(src_, q);
      if (src_.compare(q, 6, "endraw") == 0) {
        q = SkipSpaces(src_, q + 6);
        size_t e = MatchEnd(q, '%', true);
        if (e != std::string::npos) {
          std::string_view text(src_.data() + body, p - body);
          text = ApplyLStrip(text, sign, true, *line_starting);
          if (!text.empty()) Emit(Tok::kData, std::string(text), body);
          *line_starting = src_[e - 1] == '\n';
          return e;
        }
      }
      p += 2;
    }
    return Error(start, "Missing end of raw directive");
  }

  Result<size_t> LexComment(size_t start, size_t body, bool* line_starting) {
    size_t p = body;
    while ((p = src_.find("#}", p)) != std::string::npos) {
      size_t from = p;
      if (p > body && (src_[p - 1] == '-' || src_[p - 1] == '+')) from = p - 1;
      size_t e = MatchEnd(from, '#', true);
      if (e == std::string::npos) e = MatchEnd(p, '#', true);
      *line_starting = src_[e - 1] == '\n';
      return e;
    }
    return Error(start, "Missing end of comment tag");
  }

  Result<size_t> LexTag(size_t start, size_t pos, char kind, bool* line_starting) {
    const char closer = kind == '%' ? '%' : '}';
    Emit(kind == '%' ? Tok::kBlockBegin : Tok::kVarBegin, kind == '%' ? "{%" : "{{", start);
    std::vector<char> balance;
    while (true) {
      if (pos >= src_.size()) {
        return Error(start, kind == '%' ? "unexpected end of template: unclosed '{%' tag"
                                        : "unexpected end of template: unclosed '{{' tag");
      }
      if (balance.empty()) {
        size_t e = MatchEnd(pos, closer, kind == '%');
        if (e != std::string::npos) {
          Emit(kind == '%' ? Tok::kBlockEnd : Tok::kVarEnd, kind == '%' ? "%}" : "}}", pos);
          *line_starting = src_[e - 1] == '\n';
          return e;
        }
      }
      if (size_t n = SpaceAt(src_, pos)) {
        pos = SkipSpaces(src_, pos + n);
        continue;
      }
      const char c = src_[pos];
      if (IsDigit(c)) {
        MX_ASSIGN_OR_RETURN(pos, LexNumber(pos));
        continue;
      }
      if (IsNameStart(c)) {
        size_t e = pos;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        Emit(Tok::kName, src_.substr(pos, e - pos), pos);
        pos = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        MX_ASSIGN_OR_RETURN(pos, LexString(pos));
        continue;
      }
      static const char* const kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
      bool matched = false;
      for (const char* op : kOps2) {
        if (src_.compare(pos, 2, op) == 0) {
          Emit(Tok::kOp, op, pos);
          pos += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::strchr("+-/*%~[](){}=.:|,;><", c) && c != 0) {
        if (c == '{' || c == '(' || c == '[') {
          if (balance.size() >= 256) return Error(pos, "brackets nested too deeply");
          balance.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
        } else if (c == '}' || c == ')' || c == ']') {
          if (balance.empty()) return Error(pos, fmt::format("unexpected '{}'", c));
          if (balance.back() != c)
            return Error(pos, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
          balance.pop_back();
        }
        Emit(Tok::kOp, std::string(1, c), pos);
        ++pos;
        continue;
      }
      size_t q = pos;
      char32_t cp = DecodeUtf8At(src_, &q);
      std::string shown;
      AppendStringRepr(EncodeUtf8(std::u32string_view(&cp, 1)), &shown);
      return Error(pos, fmt::format("unexpected char {}", shown));
    }
  }

  static void AppendStringRepr(const std::string& s, std::string* out) {
    out->push_back('\'');
    out->append(s);
    out->push_back('\'');
  }

  Result<size_t> LexNumber(size_t pos) {
    auto digits = [&](size_t p) {  // (\d+_)*\d+
      size_t e = p;
      while (e < src_.size() && (IsDigit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() &&
                                                      IsDigit(src_[e + 1]) && e > p)))
        ++e;
      return e;
    };
    // Integers with a base prefix.
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      char b = static_cast<char>(src_[pos + 1] | 0x20);
      int base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 0;
      if (base) {
        size_t e = pos + 2;
        std::string clean;
        while (e < src_.size()) {
          char c = static_cast<char>(src_[e] | 0x20);
          bool ok = (base == 16 && (IsDigit(src_[e]) || (c >= 'a' && c <= 'f'))) ||
                    (base == 8 && src_[e] >= '0' && src_[e] <= '7') ||
                    (base == 2 && (src_[e] == '0' || src_[e] == '1'));
          if (ok) {
            clean.push_back(src_[e]);
          } else if (src_[e] != '_') {
            break;
          }
          ++e;
        }
        if (!clean.empty()) {
          errno = 0;
          unsigned long long v = std::strtoull(clean.c_str(), nullptr, base);
          if (errno || v > static_cast<unsigned long long>(INT64_MAX))
            return Error(pos, "integer literal too large");
          Emit(Tok::kInt, std::to_string(v), pos);
          return e;
        }
      }
    }
    const bool after_dot = pos > 0 && src_[pos - 1] == '.';
    size_t e = digits(pos);
    bool is_float = false;
    if (!after_dot) {
      size_t f = e;
      if (f + 1 < src_.size() && src_[f] == '.' && IsDigit(src_[f + 1])) {
        f = digits(f + 1);
        is_float = true;
      }
      if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
        size_t x = f + 1;
        if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
        if (x < src_.size() && IsDigit(src_[x])) {
          f = digits(x);
          is_float = true;
        }
      }
      if (is_float) e = f;
    }
    std::string clean;
    for (size_t i = pos; i < e; ++i)
      if (src_[i] != '_') clean.push_back(src_[i]);
    if (!is_float && clean.size() > 18) {
      if (clean.size() > 19 || clean > "9223372036854775807")
        return Error(pos, "integer literal too large");
    }
    Emit(is_float ? Tok::kFloat : Tok::kInt, clean, pos);
    return e;
  }

  Result<size_t> LexString(size_t pos) {
    const char q = src_[pos];
    size_t p = pos + 1;
    std::string out;
    while (true) {
      if (p >= src_.size()) return Error(pos, fmt::format("unexpected char '{}'", q));
      char c = src_[p];
      if (c == q) break;
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) return Error(pos, fmt::format("unexpected char '{}'", q));
      char e = src_[p + 1];
      p += 2;
      auto hex = [&](int n) -> Result<char32_t> {
        if (p + n > src_.size()) return Error(p, "truncated \\x, \\u or \\U escape");
        char32_t v = 0;
        for (int i = 0; i < n; ++i) {
          char h = src_[p + i];
          int d = IsDigit(h)                               ? h - '0'
                  : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10
                                                           : -1;
          if (d < 0) return Error(p, "truncated \\x, \\u or \\U escape");
          v = v * 16 + d;
        }
        p += n;
        if (v > 0x10FFFF) return Error(p, "illegal Unicode character");
        return v;
      };
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x': {
          MX_ASSIGN_OR_RETURN(char32_t v, hex(2));
          AppendUtf8(v, &out);
          break;
        }
        case 'u': {
          MX_ASSIGN_OR_RETURN(char32_t v, hex(4));
          AppendUtf8(v, &out);
          break;
        }
        case 'U': {
          MX_ASSIGN_OR_RETURN(char32_t v, hex(8));
          AppendUtf8(v, &out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i)
              v = v * 8 + (src_[p++] - '0');
            AppendUtf8(v, &out);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    Emit(Tok::kString, std::move(out), pos);
    return p + 1;
  }

  std::string src_;
  std::string name_;
  LexOptions opt_;
  std::vector<Token> tokens_;
  mutable size_t lc_pos_ = 0;
  mutable int lc_line_ = 1;
  mutable int lc_col_ = 1;
};

std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

Result<std::vector<Token>> Lex(std::string_view source, std::string_view name,
                               const LexOptions& options) {
  Lexer lexer(NormalizeNewlines(source), name, options);
  return lexer.Run();
}

}  // namespace mx::jinja
