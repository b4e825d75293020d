// Helpers shared by the verbs that run the model: kernel-level choice and token-id lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/kernels.h"

namespace mx::cli {

// "" = the best level for this CPU; otherwise ref|avx2|avx512 (an error names a bad or
// unavailable level).
Result<const KernelTable*> ChooseKernels(const std::string& name);

// "5,17,200" -> ids; each must lie in [0, vocab). `flag` names the option in errors.
Result<std::vector<int32_t>> ParseIdList(const std::string& text, int64_t vocab,
                                         const std::string& flag);

}  // namespace mx::cli
