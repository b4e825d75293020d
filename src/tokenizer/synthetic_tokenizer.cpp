// SyntheticTokenizerJson: bytes first, then two- and three-character merges of a pool of byte
// characters. note: a plain (key-sorted) json, not ordered_json, whose object inserts search
// linearly (minutes at 154,880).
#include "tokenizer/synthetic_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace mx::tok {
namespace {

// GLM-4's (and GLM-5's) split regex, as its tokenizer.json has it; llama.cpp's "glm4"
// pre-tokenizer is the same expression with the case-insensitive group spelled out.
constexpr std::string_view kGlm4Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The bytes whose characters make the merges, in merge order.
std::vector<uint8_t> Pool(SyntheticVocab kind) {
  std::vector<uint8_t> pool;
  if (kind == SyntheticVocab::kPrintablePairs) {
    // GPT-2's printable bytes (the ones that stand for themselves): '!'..'~', '¡'..'¬', '®'..'ÿ'.
    for (int b = 0; b < 256; ++b) {
      if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) {
        pool.push_back(static_cast<uint8_t>(b));
      }
    }
    return pool;
  }
  // hf_to_gguf.py's make_vocab: letters, digits and space first, then every other byte.
  for (int b = 'a'; b <= 'z'; ++b) pool.push_back(static_cast<uint8_t>(b));
  for (int b = 'A'; b <= 'Z'; ++b) pool.push_back(static_cast<uint8_t>(b));
  for (int b = '0'; b <= '9'; ++b) pool.push_back(static_cast<uint8_t>(b));
  pool.push_back(' ');
  std::vector<bool> in(256, false);
  for (uint8_t b : pool) in[b] = true;
  for (int b = 0; b < 256; ++b) {
    if (!in[b]) pool.push_back(static_cast<uint8_t>(b));
  }
  return pool;
}

}  // namespace

Result<SyntheticVocab> ParseSyntheticVocab(std::string_view name) {
  if (name == "printable-pairs") return SyntheticVocab::kPrintablePairs;
  if (name == "gguf-bpe") return SyntheticVocab::kGgufBpe;
  return InvalidArgument("synthetic tokenizer '{}': expected printable-pairs or gguf-bpe", name);
}

Result<std::string> SyntheticTokenizerJson(int32_t vocab_size,
                                           const std::vector<int32_t>& special_ids,
                                           SyntheticVocab kind) {
  const std::vector<uint8_t> pool = Pool(kind);
  const int64_t n_pairs = static_cast<int64_t>(pool.size() * pool.size());
  const int64_t most = 256 + n_pairs + n_pairs * static_cast<int64_t>(pool.size());
  if (vocab_size < 256 || vocab_size > most) {
    return InvalidArgument("synthetic tokenizer: vocab_size {} is outside [256, {}]", vocab_size,
                           most);
  }
  const ByteLevelAlphabet alpha;
  nlohmann::json vocab = nlohmann::json::object();
  std::vector<std::string> text_of(static_cast<size_t>(vocab_size));
  for (int b = 0; b < 256; ++b) {
    text_of[b] = std::string(alpha.Utf8Of(static_cast<uint8_t>(b)));
    vocab[text_of[b]] = b;
  }
  nlohmann::json merges = nlohmann::json::array();
  int32_t id = 256;
  for (size_t i = 0; i < pool.size() && id < vocab_size; ++i) {
    for (size_t j = 0; j < pool.size() && id < vocab_size; ++j, ++id) {
      const std::string a(alpha.Utf8Of(pool[i])), b(alpha.Utf8Of(pool[j]));
      text_of[id] = a + b;
      vocab[text_of[id]] = id;
      merges.push_back(a + " " + b);
    }
  }
  // Past the pairs (GLM-5's 154,880 ids): three-character tokens, each a pair merged with one
  // more pool character, pairs in id order.
  for (int32_t pair = 256; pair < 256 + n_pairs && id < vocab_size; ++pair) {
    for (size_t j = 0; j < pool.size() && id < vocab_size; ++j, ++id) {
      const std::string c(alpha.Utf8Of(pool[j]));
      text_of[id] = text_of[pair] + c;
      vocab[text_of[id]] = id;
      merges.push_back(text_of[pair] + " " + c);
    }
  }
  nlohmann::json added = nlohmann::json::array();
  std::vector<int32_t> specials = special_ids;
  std::sort(specials.begin(), specials.end());
  specials.erase(std::unique(specials.begin(), specials.end()), specials.end());
  for (int32_t s : specials) {
    if (s < 0 || s >= vocab_size) {
      return InvalidArgument("synthetic tokenizer: special id {} outside the vocabulary of {}", s,
                             vocab_size);
    }
    added.push_back({{"id", s},
                     {"content", text_of[s]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", false}};
  nlohmann::json pre_tokenizer = byte_level;
  if (kind == SyntheticVocab::kGgufBpe) {
    const nlohmann::json split = {{"type", "Split"},
                                  {"pattern", {{"Regex", std::string(kGlm4Pattern)}}},
                                  {"behavior", "Isolated"},
                                  {"invert", false}};
    pre_tokenizer = {{"type", "Sequence"},
                     {"pretokenizers", nlohmann::json::array({split, byte_level})}};
  }
  const nlohmann::json j = {{"version", "1.0"},
                            {"truncation", nullptr},
                            {"padding", nullptr},
                            {"added_tokens", added},
                            {"normalizer", nullptr},
                            {"pre_tokenizer", pre_tokenizer},
                            {"post_processor", nullptr},
                            {"decoder", byte_level},
                            {"model",
                             {{"type", "BPE"},
                              {"dropout", nullptr},
                              {"unk_token", nullptr},
                              {"continuing_subword_prefix", nullptr},
                              {"end_of_word_suffix", nullptr},
                              {"fuse_unk", false},
                              {"byte_fallback", false},
                              {"ignore_merges", false},
                              {"vocab", vocab},
                              {"merges", merges}}}};
  return j.dump();
}

}  // namespace mx::tok
