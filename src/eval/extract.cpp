#include "eval/extract.h"

#include <cctype>
#include <vector>

namespace mx::eval {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

constexpr std::string_view kUnicodeMinus = "\xE2\x88\x92";  // U+2212

struct Span {
  size_t begin, end;  // [begin, end) in the text
};

// Length of a sign at `i` ("-" or U+2212), or 0.
size_t SignAt(std::string_view t, size_t i) {
  if (t[i] == '-') return 1;
  if (t.substr(i, kUnicodeMinus.size()) == kUnicodeMinus) return kUnicodeMinus.size();
  return 0;
}

// The number starting exactly at `i`, if any: [sign][$]digits[,ddd]*[.digits].
bool NumberAt(std::string_view t, size_t i, Span* out) {
  size_t j = i;
  if (size_t s = SignAt(t, j); s > 0) {
    if (i > 0 && IsAlnum(t[i - 1])) return false;  // "5-3": a minus, not a sign
    j += s;
  }
  if (j < t.size() && t[j] == '$') ++j;
  if (j >= t.size() || !IsDigit(t[j])) return false;
  while (j < t.size() && IsDigit(t[j])) ++j;
  while (j + 3 < t.size() && t[j] == ',' && IsDigit(t[j + 1]) && IsDigit(t[j + 2]) &&
         IsDigit(t[j + 3]) && (j + 4 >= t.size() || !IsDigit(t[j + 4]))) {
    j += 4;
  }
  if (j + 1 < t.size() && t[j] == '.' && IsDigit(t[j + 1])) {
    ++j;
    while (j < t.size() && IsDigit(t[j])) ++j;
  }
  *out = {i, j};
  return true;
}

std::vector<Span> Numbers(std::string_view t, size_t from) {
  std::vector<Span> spans;
  size_t i = from;
  while (i < t.size()) {
    Span s;
    if (NumberAt(t, i, &s)) {
      spans.push_back(s);
      i = s.end;
    } else {
      ++i;
    }
  }
  return spans;
}

char Upper(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }

bool StartsWithNoCase(std::string_view t, size_t i, std::string_view word) {
  if (i + word.size() > t.size()) return false;
  for (size_t k = 0; k < word.size(); ++k) {
    if (Upper(t[i + k]) != Upper(word[k])) return false;
  }
  return true;
}

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

// A choice letter at `i` that stands alone (no letter or digit right after it).
bool LetterAt(std::string_view t, size_t i, int n_choices, char* out) {
  if (i >= t.size() || t[i] < 'A' || t[i] >= 'A' + n_choices) return false;
  if (i + 1 < t.size() && IsAlnum(t[i + 1])) return false;
  *out = t[i];
  return true;
}

// "Answer: X", "answer is X", "Answer is: (X)", "**Answer:** X" starting at `i`.
bool AnswerPhraseAt(std::string_view t, size_t i, int n_choices, char* out) {
  if (!StartsWithNoCase(t, i, "answer")) return false;
  if (i > 0 && IsAlnum(t[i - 1])) return false;
  size_t j = i + 6;
  while (j < t.size() && t[j] == '*') ++j;
  j = SkipSpace(t, j);
  bool linked = false;
  if (StartsWithNoCase(t, j, "is")) {
    j = SkipSpace(t, j + 2);
    linked = true;
  }
  if (j < t.size() && t[j] == ':') {
    ++j;
    linked = true;
  }
  if (!linked) return false;
  while (j < t.size() && t[j] == '*') ++j;
  j = SkipSpace(t, j);
  if (j < t.size() && (t[j] == '(' || t[j] == '$')) ++j;
  return LetterAt(t, j, n_choices, out);
}

}  // namespace

std::string ExtractNumber(std::string_view text) {
  const size_t marker = text.find("####");
  if (marker != std::string_view::npos) {
    std::vector<Span> after = Numbers(text, marker + 4);
    if (!after.empty()) {
      return std::string(text.substr(after.front().begin, after.front().end - after.front().begin));
    }
  }
  std::vector<Span> all = Numbers(text, 0);
  if (all.empty()) return "";
  return std::string(text.substr(all.back().begin, all.back().end - all.back().begin));
}

std::string NormalizeNumber(std::string_view number) {
  bool negative = false;
  size_t i = 0;
  if (!number.empty()) {
    if (size_t s = SignAt(number, 0); s > 0) {
      negative = true;
      i = s;
    }
  }
  std::string int_part, frac_part;
  bool in_frac = false;
  for (; i < number.size(); ++i) {
    const char c = number[i];
    if (c == '$' || c == ',') continue;
    if (c == '.' && !in_frac) {
      in_frac = true;
    } else if (IsDigit(c)) {
      (in_frac ? frac_part : int_part) += c;
    } else {
      return "";
    }
  }
  if (int_part.empty() && frac_part.empty()) return "";
  const size_t nz = int_part.find_first_not_of('0');
  int_part = nz == std::string::npos ? "0" : int_part.substr(nz);
  while (!frac_part.empty() && frac_part.back() == '0') frac_part.pop_back();
  std::string out = int_part;
  if (!frac_part.empty()) out += "." + frac_part;
  if (negative && out != "0") out = "-" + out;
  return out;
}

char ExtractLetter(std::string_view text, int n_choices) {
  char found = '\0';
  for (size_t i = 0; i < text.size(); ++i) {
    char c;
    if (AnswerPhraseAt(text, i, n_choices, &c)) found = c;
  }
  if (found != '\0') return found;
  // A reply that is just the letter, or starts with "B)" / "B." / "(B)".
  size_t j = SkipSpace(text, 0);
  while (j < text.size() && (text[j] == '*' || text[j] == '(')) ++j;
  char c;
  if (LetterAt(text, j, n_choices, &c)) {
    const size_t k = j + 1;
    if (k >= text.size() || text[k] == ')' || text[k] == '.' || text[k] == ':' || text[k] == '*' ||
        SkipSpace(text, k) == text.size()) {
      return c;
    }
  }
  for (size_t i = 0; i + 2 < text.size(); ++i) {
    if (text[i] == '(' && text[i + 2] == ')' && text[i + 1] >= 'A' &&
        text[i + 1] < 'A' + n_choices) {
      found = text[i + 1];
    }
  }
  return found;
}

}  // namespace mx::eval
