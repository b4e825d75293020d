// Tables for Unicode NFC, generated from Python's unicodedata by `tools/bpe_reference.py gen-nfc`
// into unicode_nfc_data.cpp. Used only by unicode.cpp.
#pragma once

namespace mx::tok::nfc_data {

struct CccEntry {
  char32_t cp;
  unsigned char ccc;  // canonical combining class, nonzero
};
struct DecompEntry {
  char32_t cp;
  int offset;  // full canonical decomposition (already recursive) in kDecompPool
  int length;
};
struct ComposeEntry {
  char32_t first;
  char32_t second;
  char32_t composite;  // primary composites only (exclusions removed); sorted by (first, second)
};
struct RangeEntry {
  char32_t lo;
  char32_t hi;  // inclusive
};

extern const char kUnicodeVersion[];
extern const CccEntry kCcc[];  // sorted by cp
extern const int kCccCount;
extern const char32_t kDecompPool[];
extern const DecompEntry kDecomp[];  // sorted by cp; Hangul syllables are algorithmic
extern const int kDecompCount;
extern const ComposeEntry kCompose[];
extern const int kComposeCount;
// Code points whose presence may make NFC change a string (NFC_QC No or Maybe, nonzero ccc):
// a string without any of them is already NFC.
extern const RangeEntry kUnsafe[];
extern const int kUnsafeCount;

}  // namespace mx::tok::nfc_data
