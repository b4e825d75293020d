// Regular expressions -> grammar elements. The whole text must match (as vLLM / sglang
// regex constraints and JSON Schema `pattern` here are used); `^` at the start and `$` at the
// end are accepted and change nothing. Supported: literals (UTF-8), `.` (ECMAScript: not a
// line terminator), classes `[...]` with
// ranges, negation and `\d \w \s` (and their negations), groups `(...)`, `(?:...)`, named
// groups, `|`, `* + ? {n} {n,} {n,m}` (a lazy `?` suffix is accepted: it changes which match,
// not whether), escapes `\n \t \r \f \v \0 \xHH \x{H..} \uHHHH` and escaped punctuation.
// Backreferences, lookaround, word boundaries, possessive quantifiers and POSIX classes are
// Unimplemented errors naming the construct and its offset.
#pragma once

#include <string_view>

#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace mx::grammar {

struct RegexOptions {
  // The match is the content of a JSON string: `"`, `\` and control characters are written
  // as JSON escapes (\" \\ \n \t \r \b \f \u00XX) so the output stays valid JSON.
  bool json_string = false;
};

// The elements matching `pattern`, appended to *out. Errors name the offset.
Status CompileRegex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& opt, Seq* out);

// A whole grammar whose language is `pattern`.
Result<Grammar> RegexGrammar(std::string_view pattern, const GrammarLimits& limits = {});

// One element for code point set `r` (json_string: JSON-escaped as above).
Elem CharSetElem(GrammarBuilder& b, const CodepointRanges& r, bool json_string);

}  // namespace mx::grammar
