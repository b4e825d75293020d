// Random checkpoints of any GlmMoeDsa config, for benchmarks: a real config (GLM-5.2's 753 B
// parameters) cut to a few layers with every width kept, written as Hugging Face safetensors in
// shards, streaming (one chunk of one tensor in memory at a time), then quantized with the
// project's own recipes, each folder with a synthetic tokenizer.json of the config's vocabulary
// (tokenizer/synthetic_tokenizer.h; its gguf-bpe kind is the one ../shared/anchors/hf_to_gguf.py
// gives ik_llama.cpp), so `mxserve serve`, `bench offline` and side_by_side.py run on it.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "tokenizer/synthetic_tokenizer.h"

namespace mx::bench {

// How to cut a config: layers / dense / mtp < 0 keep the config's own value.
struct ConfigCut {
  int layers = -1;  // num_hidden_layers
  int dense = -1;   // first_k_dense_replace (the first `dense` layers have a dense MLP)
  int mtp = -1;     // num_nextn_predict_layers
};

// Writes `config_path` cut by `cut` to `out_path` (indexer_types and mlp_layer_types cut to the
// first `layers` entries, the rest of the fields as they are). InvalidArgument naming the field
// when the cut is out of range.
Status WriteCutConfig(const std::string& config_path, const ConfigCut& cut,
                      const std::string& out_path);

// Writes a random bf16 checkpoint of `dir`/config.json into `dir` (shards of at most
// `max_shard_bytes`): N(0, 0.02) weights, norms 1, biases 0, a function of (seed, tensor name,
// chunk) only; chunks are generated on `pool`.
Status WriteRandomBf16(const std::string& dir, uint64_t max_shard_bytes, uint64_t seed,
                       ThreadPool& pool);

// A synthetic tokenizer.json of `kind` beside the checkpoint in `dir` (its config's vocabulary
// size, EOS and pad ids as special tokens); written once: a tokenizer.json already there is kept
// whatever its kind.
Status EnsureSyntheticTokenizer(const std::string& dir,
                                tok::SyntheticVocab kind = tok::SyntheticVocab::kPrintablePairs);

}  // namespace mx::bench
