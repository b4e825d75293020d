// Small helpers shared inside the tokenizer module.
#pragma once

#include "base/function_ref.h"  // FunctionRef (mx::FunctionRef, visible here unqualified)

namespace mx::tok {}  // namespace mx::tok
