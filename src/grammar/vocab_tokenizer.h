// The VocabIndex of a loaded tokenizer: each id's decoded bytes (byte-level BPE: possibly a
// partial UTF-8 character), its EOS ids, and every added token (chat markers, <think>, tool
// tags: their text is not the model writing JSON) never allowed under a constraint.
#pragma once

#include <memory>
#include <vector>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace mx::grammar {

// vocab_size: the model's (ids past the tokenizer's are never allowed). allowed_special: added
// tokens by content that stay allowed, as their text (the tool-call tags for a tool-call
// grammar).
std::shared_ptr<const VocabIndex> VocabFromTokenizer(
    const tok::Tokenizer& t, std::vector<int32_t> eos_ids, int32_t vocab_size,
    const std::vector<std::string>& allowed_special = {});

}  // namespace mx::grammar
