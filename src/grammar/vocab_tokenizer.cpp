// Token bytes from the tokenizer's tables.
#include "grammar/vocab_tokenizer.h"

#include <algorithm>

namespace mx::grammar {

std::shared_ptr<const VocabIndex> VocabFromTokenizer(
    const tok::Tokenizer& t, std::vector<int32_t> eos_ids, int32_t vocab_size,
    const std::vector<std::string>& allowed_special) {
  const int32_t n = std::max(vocab_size, t.vocab_size());
  std::vector<std::string> bytes(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) bytes[id] = std::string(t.TokenBytes(id));
  std::vector<int32_t> never, allowed;
  for (const tok::AddedToken& a : t.added_tokens()) {
    if (std::find(allowed_special.begin(), allowed_special.end(), a.content) !=
        allowed_special.end()) {
      allowed.push_back(a.id);
      bytes[a.id] = a.content;
    } else {
      never.push_back(a.id);
    }
  }
  for (int32_t id = 0; id < n; ++id) {
    if (t.IsSpecial(id) && std::find(allowed.begin(), allowed.end(), id) == allowed.end())
      never.push_back(id);
  }
  return std::make_shared<const VocabIndex>(std::move(bytes), std::move(eos_ids), never);
}

}  // namespace mx::grammar
