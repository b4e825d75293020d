// String helpers the modules share, so that each rule has one definition.
#pragma once

#include <string_view>

namespace mx {

// `s` without its leading and trailing characters from `chars` (default: space and tab, HTTP's
// optional whitespace). The result views `s`.
std::string_view Trim(std::string_view s, std::string_view chars = " \t");

}  // namespace mx
