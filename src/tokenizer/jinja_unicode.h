// UTF-8 and the small part of Python's Unicode behaviour that chat templates reach:
// code-point indexing, str.isspace, upper/lower case mapping and str.isprintable (for
// repr). Decoding is lenient: an invalid byte decodes as U+FFFD, so hostile input can
// never read past the end of a string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mx::jinja {

// Decodes the code point at s[*pos] and advances *pos (by at least one byte).
char32_t DecodeUtf8At(std::string_view s, size_t* pos);
void AppendUtf8(char32_t cp, std::string* out);
std::vector<char32_t> DecodeUtf8(std::string_view s);
std::string EncodeUtf8(const std::u32string_view cps);
size_t Utf8Length(std::string_view s);  // number of code points
bool IsAscii(std::string_view s);

bool IsPySpace(char32_t c);      // str.isspace()
bool IsPyPrintable(char32_t c);  // str.isprintable() (approximate outside the BMP basics)
char32_t ToLowerCp(char32_t c);
char32_t ToUpperCp(char32_t c);
bool IsCased(char32_t c);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()
// str.strip / lstrip / rstrip; `chars` null strips whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace mx::jinja
