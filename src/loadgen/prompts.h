// Synthetic prompts built in token-id space with exact lengths and an exact shared-prefix
// fraction (serving-benchmarks.md §3.2). Request i belongs to group i % num_prefix_groups; every
// request of a group starts with the same prefix ids (byte-identical text in text mode),
// followed by a suffix unique to the request and to the seed. Lengths follow sglang's
// --random-range-ratio: uniform in [max(1, floor(L * r)), L], so r = 1 means exactly L.
//
// Ids come from a tokenizer's "clean" words (a leading space then ASCII letters, never special)
// when one is given, else from [100, vocab_size). Text mode decodes the ids and re-encodes them
// to check the length; a prompt whose re-encoding misses is redrawn (up to 10 times) and
// otherwise kept with its real length counted in `text_len_mismatches`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace mx::loadgen {

struct BenchPrompt {
  std::vector<int32_t> ids;  // always set
  std::string text;          // set in text mode
  int prompt_len = 0;        // tokens
  int output_len = 0;
  int group = -1;  // -1 without a shared prefix
  // When set, sent verbatim as the request body instead of RequestBody()'s (callers that need
  // fields a benchmark does not: eval's messages, sampling, seed, stop). It must ask for
  // "stream": true, since the client reads SSE.
  std::string body;
};

struct PromptSpec {
  int num_prompts = 100;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 1.0;
  double shared_prefix_ratio = 0.0;  // fraction of input_len shared within a group
  int num_prefix_groups = 1;
  uint64_t seed = 0;
  bool text = false;       // also produce text (chat endpoint, or --prompt-format text)
  int vocab_size = 32000;  // id range without a tokenizer
};

struct PromptSet {
  std::vector<BenchPrompt> prompts;
  std::vector<BenchPrompt> prefixes;  // one per group (for warming), output_len = 1
  int prefix_len = 0;
  int text_len_mismatches = 0;
};

// REQUIRES: tokenizer != nullptr when spec.text.
Result<PromptSet> MakePrompts(const PromptSpec& spec, const tok::Tokenizer* tokenizer);

// Ids a tokenizer offers for random prompts: leading-space ASCII words, not special.
std::vector<int32_t> CleanWordIds(const tok::Tokenizer& tokenizer);

}  // namespace mx::loadgen
