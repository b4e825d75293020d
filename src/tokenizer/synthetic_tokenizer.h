// A byte-level BPE tokenizer.json of exactly `vocab_size` tokens for a random checkpoint (the
// bench-scale ones bench/model_bench writes), so that `mxserve serve` can run it and decode what
// it generates. The vocabulary is the one ../shared/anchors/hf_to_gguf.py gives ik_llama.cpp for
// the same checkpoint: id b < 256 is byte b (GPT-2's byte-level character for it); the rest are
// two-byte merges of the printable byte characters, in order, each with its merge rule, then
// (past 256 + 188² ids, e.g. GLM-5's 154,880) three-byte merges of a pair and a printable byte. Ids
// in `special_ids` (the config's EOS / pad) are also listed as special added tokens with their
// vocabulary text. The text is a measure of nothing: prompts are sent as ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mx::tok {

// The tokenizer.json text. vocab_size must be at least 256 and at most 256 + 188² + 188³.
Result<std::string> SyntheticTokenizerJson(int32_t vocab_size,
                                           const std::vector<int32_t>& special_ids);

}  // namespace mx::tok
