// Strict JSON parsing for checkpoint headers and index files. nlohmann::json silently keeps
// one value of a duplicated object key; a safetensors header with two entries of the same
// name is ambiguous (which bytes are the tensor?), so this parser rejects duplicate keys at
// every level. It also bounds nesting depth and array length so that a hostile header cannot
// make the DOM explode, and never throws.
#pragma once

#include <cstddef>
#include <limits>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace mx {

struct StrictJsonLimits {
  size_t max_depth = 64;                                      // nested objects + arrays
  size_t max_array_len = std::numeric_limits<size_t>::max();  // elements per array
};

// Parses `text` as exactly one JSON value (trailing whitespace allowed). On failure returns
// DataLoss "<what>: invalid JSON at byte N: ..." / "duplicate key 'k'" / "nesting deeper
// than D", where `what` names the file (e.g. "a.safetensors: header").
Result<nlohmann::json> ParseStrictJson(std::string_view text, std::string_view what,
                                       const StrictJsonLimits& limits = {});

// The offset of the first byte of `s` that is not part of well-formed UTF-8 (no overlongs,
// no surrogates, <= U+10FFFF), or std::string_view::npos when all of it is.
size_t FindInvalidUtf8(std::string_view s);
inline bool IsValidUtf8(std::string_view s) { return FindInvalidUtf8(s) == std::string_view::npos; }

}  // namespace mx
