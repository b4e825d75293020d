// Shared verb helpers.
#include "cli/cli_util.h"

#include <cstdlib>

namespace mx::cli {

Result<const KernelTable*> ChooseKernels(const std::string& name) {
  if (name.empty()) return &SelectKernels();
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (name == KernelLevelName(l)) {
      const KernelTable* t = GetKernelTable(l);
      if (t == nullptr) {
        return InvalidArgument("--kernels {}: not available on this CPU or in this build", name);
      }
      return t;
    }
  }
  return InvalidArgument("--kernels: unknown level '{}' (ref, avx2, avx512)", name);
}

Result<std::vector<int32_t>> ParseIdList(const std::string& text, int64_t vocab,
                                         const std::string& flag) {
  std::vector<int32_t> ids;
  if (text.empty()) return InvalidArgument("{}: no ids given", flag);
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string tok = text.substr(pos, end - pos);
    while (!tok.empty() && tok.front() == ' ') tok.erase(tok.begin());
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\r')) tok.pop_back();
    char* e = nullptr;
    long long v = std::strtoll(tok.c_str(), &e, 10);
    if (tok.empty() || *e != '\0') return InvalidArgument("{}: '{}' is not a token id", flag, tok);
    if (v < 0 || v >= vocab) {
      return InvalidArgument("{}: id {} is outside the vocabulary [0, {})", flag, v, vocab);
    }
    ids.push_back(static_cast<int32_t>(v));
    pos = end + 1;
  }
  return ids;
}

}  // namespace mx::cli
