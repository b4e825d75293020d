// UTF-8 primitives and Unicode NFC for the tokenizer. All functions are pure and thread-safe.
// Invalid UTF-8 is replaced the way Rust's String::from_utf8_lossy and Python's
// errors="replace" do it: one U+FFFD per maximal invalid subpart (Unicode §3.9, Table 3-7).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mx::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Decodes one code point at s[*pos]. On success stores it in *cp, advances *pos past it and
// returns true. On an invalid or truncated sequence advances *pos past the maximal invalid
// subpart (at least one byte) and returns false.
// REQUIRES: *pos < s.size().
bool DecodeUtf8(std::string_view s, size_t* pos, char32_t* cp);

// Appends the UTF-8 encoding of cp (a scalar value; surrogates and > U+10FFFF become U+FFFD).
void AppendUtf8(std::string* out, char32_t cp);

bool IsValidUtf8(std::string_view s);

// Returns s with every maximal invalid subpart replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view s);

// Length of the prefix of s that a streaming decoder may emit now: everything except a trailing
// sequence that is a valid-so-far but incomplete UTF-8 character (which more bytes may finish).
// Invalid bytes count as emittable (they become U+FFFD either way).
size_t EmittableUtf8Prefix(std::string_view s);

// Rust char::is_whitespace (Unicode White_Space).
bool IsUnicodeWhitespace(char32_t c);

// Unicode Normalization Form C of valid UTF-8 `s` (tables: Python unicodedata's Unicode
// version, see kNfcUnicodeVersion). Fast path: returns a copy when s has no code point that
// can change under NFC.
std::string NfcNormalize(std::string_view s);
// True when NfcNormalize(s) == s is known without normalizing (NFC quick check "Yes").
bool IsNfcQuickYes(std::string_view s);
const char* NfcUnicodeVersion();

}  // namespace mx::tok
