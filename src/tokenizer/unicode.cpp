// UTF-8 decoding with maximal-subpart replacement, and Unicode NFC (decompose, canonical
// reorder, compose) over generated tables plus the algorithmic Hangul rules.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "tokenizer/unicode_nfc_data.h"

namespace mx::tok {

bool DecodeUtf8(std::string_view s, size_t* pos, char32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = *pos;
  const unsigned char b0 = p[i];
  if (b0 < 0x80) {
    *cp = b0;
    *pos = i + 1;
    return true;
  }
  int len;
  char32_t c;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    c = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    c = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    c = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *pos = i + 1;
    return false;
  }
  for (int k = 1; k < len; ++k) {
    if (i + k >= n) {
      *pos = i + k;
      return false;
    }
    const unsigned char b = p[i + k];
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      *pos = i + k;
      return false;
    }
    c = (c << 6) | (b & 0x3F);
  }
  *cp = c;
  *pos = i + len;
  return true;
}

void AppendUtf8(std::string* out, char32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  char32_t cp;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    if (!DecodeUtf8(s, &i, &cp)) return false;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    char32_t cp;
    if (DecodeUtf8(s, &i, &cp)) {
      out.append(s.substr(start, i - start));
    } else {
      out.append(kReplacementUtf8);
    }
  }
  return out;
}

size_t EmittableUtf8Prefix(std::string_view s) {
  // Only the last (up to 3) bytes can be an incomplete character.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const auto b = static_cast<unsigned char>(s[start]);
    if (b < 0x80) return n;              // ASCII: nothing pending after it
    if (b < 0xC0) continue;              // continuation byte: look further back for the lead
    if (b < 0xC2 || b > 0xF4) return n;  // never starts a character
    size_t pos = start;
    char32_t cp;
    if (DecodeUtf8(s, &pos, &cp)) return n;  // complete character at the end
    // Invalid: pending only if the failure is truncation (the subpart reaches the end).
    return pos >= n ? start : n;
  }
  return n;
}

bool IsUnicodeWhitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// ---- NFC --------------------------------------------------------------------------------------

namespace {

using namespace nfc_data;

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
              kSCount = kLCount * kNCount;

bool IsUnsafe(char32_t c) {
  if (c < 0x300) return false;
  const RangeEntry* end = kUnsafe + kUnsafeCount;
  const RangeEntry* it =
      std::upper_bound(kUnsafe, end, c, [](char32_t v, const RangeEntry& r) { return v < r.lo; });
  return it != kUnsafe && c <= (it - 1)->hi;
}

int Ccc(char32_t c) {
  if (c < 0x300) return 0;
  const CccEntry* end = kCcc + kCccCount;
  const CccEntry* it =
      std::lower_bound(kCcc, end, c, [](const CccEntry& e, char32_t v) { return e.cp < v; });
  return it != end && it->cp == c ? it->ccc : 0;
}

void Decompose(char32_t c, std::vector<char32_t>* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const int s = static_cast<int>(c - kSBase);
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (c >= 0xC0) {
    const DecompEntry* end = kDecomp + kDecompCount;
    const DecompEntry* it = std::lower_bound(
        kDecomp, end, c, [](const DecompEntry& e, char32_t v) { return e.cp < v; });
    if (it != end && it->cp == c) {
      out->insert(out->end(), kDecompPool + it->offset, kDecompPool + it->offset + it->length);
      return;
    }
  }
  out->push_back(c);
}

// Returns the primary composite of (a, b) or 0.
char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const ComposeEntry* end = kCompose + kComposeCount;
  const ComposeEntry* it =
      std::lower_bound(kCompose, end, std::pair(a, b), [](const ComposeEntry& e, auto v) {
        return e.first < v.first || (e.first == v.first && e.second < v.second);
      });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

const char* NfcUnicodeVersion() { return kUnicodeVersion; }

bool IsNfcQuickYes(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0xCC) {  // below U+0300 (lead bytes < 0xCC encode code points < U+0300)
      ++i;
      continue;
    }
    char32_t cp;
    if (!DecodeUtf8(s, &i, &cp)) continue;
    if (IsUnsafe(cp)) return false;
  }
  return true;
}

std::string NfcNormalize(std::string_view s) {
  if (IsNfcQuickYes(s)) return std::string(s);
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp;
    if (!DecodeUtf8(s, &i, &cp)) cp = kReplacementChar;
    Decompose(cp, &cps);
  }
  // Canonical ordering: stable sort each run of nonzero combining classes.
  std::vector<int> ccc(cps.size());
  for (size_t k = 0; k < cps.size(); ++k) ccc[k] = Ccc(cps[k]);
  for (size_t k = 0; k < cps.size();) {
    if (ccc[k] == 0) {
      ++k;
      continue;
    }
    size_t e = k;
    while (e < cps.size() && ccc[e] != 0) ++e;
    if (e - k > 1) {
      std::vector<std::pair<int, char32_t>> run;
      for (size_t r = k; r < e; ++r) run.emplace_back(ccc[r], cps[r]);
      std::stable_sort(run.begin(), run.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (size_t r = k; r < e; ++r) std::tie(ccc[r], cps[r]) = run[r - k];
    }
    k = e;
  }
  // Canonical composition.
  std::vector<char32_t> out;
  std::vector<int> out_ccc;
  out.reserve(cps.size());
  ptrdiff_t starter = -1;  // index in `out` of the last starter
  for (size_t k = 0; k < cps.size(); ++k) {
    const char32_t c = cps[k];
    const int cc = ccc[k];
    if (starter >= 0) {
      const int last_cc = out_ccc.back();
      const bool adjacent = static_cast<size_t>(starter) + 1 == out.size();
      // Not blocked: either adjacent to the starter, or every char in between has a lower,
      // nonzero class than c.
      if (adjacent || (last_cc != 0 && last_cc < cc)) {
        if (char32_t comp = Compose(out[starter], c); comp != 0) {
          out[starter] = comp;
          continue;
        }
      }
    }
    if (cc == 0) starter = static_cast<ptrdiff_t>(out.size());
    out.push_back(c);
    out_ccc.push_back(cc);
  }
  std::string result;
  result.reserve(s.size());
  for (char32_t c : out) AppendUtf8(&result, c);
  return result;
}

}  // namespace mx::tok
