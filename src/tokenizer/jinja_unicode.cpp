// UTF-8 helpers and Python-compatible case mapping for the Jinja engine.
#include "tokenizer/jinja_unicode.h"

#include "tokenizer/unicode.h"

namespace mx::jinja {

char32_t DecodeUtf8At(std::string_view s, size_t* pos) {
  const size_t n = s.size();
  size_t i = *pos;
  const unsigned char c = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return k < n && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80; };
  if (c < 0x80) {
    *pos = i + 1;
    return c;
  }
  int len = 0;
  char32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    *pos = i + 1;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    if (!cont(i + k)) {
      *pos = i + 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  }
  const bool overlong =
      (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return 0xFFFD;
  }
  *pos = i + len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) { tok::AppendUtf8(out, cp); }

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(DecodeUtf8At(s, &pos));
  return out;
}

std::string EncodeUtf8(const std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) AppendUtf8(c, &out);
  return out;
}

size_t Utf8Length(std::string_view s) {
  if (IsAscii(s)) return s.size();
  size_t pos = 0, n = 0;
  while (pos < s.size()) {
    DecodeUtf8At(s, &pos);
    ++n;
  }
  return n;
}

bool IsAscii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsPyPrintable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E ||
      c == 0x1680)
    return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000)
    return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE ||
      c == 0xFFFF)
    return false;
  if (c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F) || c >= 0xF0000) return false;
  return true;
}

char32_t ToLowerCp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c == 0x1C4 || c == 0x1C5 || c == 0x1C7 || c == 0x1C8 || c == 0x1CA || c == 0x1CB)
    return (c == 0x1C4 || c == 0x1C7 || c == 0x1CA) ? c + 2 : c + 1;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

char32_t ToUpperCp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x1C5 || c == 0x1C6 || c == 0x1C8 || c == 0x1C9 || c == 0x1CB || c == 0x1CC)
    return (c == 0x1C6 || c == 0x1C9 || c == 0x1CC) ? c - 2 : c - 1;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 1) ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3B1 && c <= 0x3C9) return c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

bool IsCased(char32_t c) {
  return ToLowerCp(c) != c || ToUpperCp(c) != c || c == 0xDF || c == 0x3C2;
}

namespace {

template <typename F>
std::string MapCps(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) f(DecodeUtf8At(s, &pos), &out);
  return out;
}

void AppendUpper(char32_t c, std::string* out) {
  if (c == 0xDF) {  // ß -> SS
    out->append("SS");
    return;
  }
  AppendUtf8(ToUpperCp(c), out);
}

}  // namespace

std::string PyUpper(std::string_view s) { return MapCps(s, AppendUpper); }

std::string PyLower(std::string_view s) {
  return MapCps(s, [](char32_t c, std::string* out) { AppendUtf8(ToLowerCp(c), out); });
}

std::string PyTitle(std::string_view s) {
  bool prev_cased = false;
  return MapCps(s, [&](char32_t c, std::string* out) {
    if (IsCased(c)) {
      if (prev_cased) {
        AppendUtf8(ToLowerCp(c), out);
      } else if (c == 0xDF) {
        out->append("Ss");
      } else {
        AppendUtf8(ToUpperCp(c), out);
      }
      prev_cased = true;
    } else {
      AppendUtf8(c, out);
      prev_cased = false;
    }
  });
}

std::string PyCapitalize(std::string_view s) {
  bool first = true;
  return MapCps(s, [&](char32_t c, std::string* out) {
    if (first) {
      if (c == 0xDF) {
        out->append("Ss");
      } else {
        AppendUtf8(ToUpperCp(c), out);
      }
      first = false;
    } else {
      AppendUtf8(ToLowerCp(c), out);
    }
  });
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) set = DecodeUtf8(*chars);
  auto strip_it = [&](char32_t c) {
    if (!chars) return IsPySpace(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t next = b;
      if (!strip_it(DecodeUtf8At(s, &next))) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      // Start of the last code point: back over at most 3 continuation bytes.
      size_t start = e - 1;
      while (start > b && e - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        --start;
      size_t next = start;
      char32_t c = DecodeUtf8At(s, &next);
      if (next != e) {  // invalid sequence: treat the last byte alone
        start = e - 1;
        c = 0xFFFD;
      }
      if (!strip_it(c)) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

}  // namespace mx::jinja
