// Code point sets as byte-level grammar: a set of code point ranges becomes alternatives of
// UTF-8 byte-class sequences (each range split where its encodings change length or a
// continuation byte wraps), so the matcher only ever produces well-formed UTF-8.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace mx::grammar {

using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive, any order

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Sorted, merged, surrogates (D800-DFFF) and values past U+10FFFF removed.
CodepointRanges Normalize(CodepointRanges r);
// Every scalar value not in `r`.
CodepointRanges Complement(const CodepointRanges& r);
// One element matching exactly the UTF-8 encodings of the code points in `r` (a byte class
// when they are all ASCII). An empty set is an error in `b`.
Elem CodepointSet(GrammarBuilder& b, const CodepointRanges& r);
// The UTF-8 bytes of code point c (REQUIRES: a scalar value).
void AppendUtf8(uint32_t c, std::string* out);

}  // namespace mx::grammar
