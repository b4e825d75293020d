// A byte-level BPE tokenizer.json of exactly `vocab_size` tokens for a random checkpoint (the
// bench-scale ones bench/make_checkpoint writes), so that `mxserve serve` can run it and decode
// what it generates. Two vocabularies, both built the same way from a pool of byte characters
// (GPT-2's byte-level alphabet): id b < 256 is byte b; then every two-character merge of the
// pool in pool order (first character major), each with its merge rule; then (past 256 + pool²
// ids, e.g. GLM-5's 154,880) three-character tokens, each a pair merged with one more pool
// character, pairs in id order.
//   kPrintablePairs: the pool is GPT-2's 188 printable bytes in byte order and the
//     pre-tokenizer is ByteLevel alone (a segment is one piece). The default.
//   kGgufBpe: the vocabulary ../shared/anchors/hf_to_gguf.py writes into its GGUF (make_vocab):
//     the pool is all 256 byte characters, a-z A-Z 0-9 and space first, then the rest in byte
//     order; the pre-tokenizer splits with GLM-4's regex (llama.cpp's "glm4") before ByteLevel,
//     so mxserve and ik_llama.cpp turn the same text into the same ids.
// Ids in `special_ids` (the config's EOS / pad) are also listed as special added tokens with
// their vocabulary text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mx::tok {

enum class SyntheticVocab { kPrintablePairs, kGgufBpe };

// "printable-pairs" or "gguf-bpe"; InvalidArgument naming both otherwise.
Result<SyntheticVocab> ParseSyntheticVocab(std::string_view name);

// The tokenizer.json text. vocab_size must be at least 256 and at most 256 + p² + p³ for a pool
// of p characters (188 or 256).
Result<std::string> SyntheticTokenizerJson(int32_t vocab_size,
                                           const std::vector<int32_t>& special_ids,
                                           SyntheticVocab kind = SyntheticVocab::kPrintablePairs);

}  // namespace mx::tok
