// The nesting depth of JSON text by a byte scan, before anything is parsed: nlohmann's parser
// and a json value's copy and destructor recurse once per level, so hostile input (a request
// body, a schema) is measured first and refused when too deep.
#pragma once

#include <string_view>

namespace mx {

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count);
// stops scanning, returning a value > stop_above, once it exceeds stop_above. Iterative.
int JsonNestingDepth(std::string_view text, int stop_above);

}  // namespace mx
