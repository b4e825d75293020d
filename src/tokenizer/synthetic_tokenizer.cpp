// SyntheticTokenizerJson: bytes first, then two-byte merges of the printable bytes. note: a plain
// (key-sorted) json, not ordered_json, whose object inserts search linearly (minutes at 154,880).
#include "tokenizer/synthetic_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace mx::tok {

Result<std::string> SyntheticTokenizerJson(int32_t vocab_size,
                                           const std::vector<int32_t>& special_ids) {
  // GPT-2's printable bytes (the ones that stand for themselves): '!'..'~', '¡'..'¬', '®'..'ÿ'.
  std::vector<uint8_t> printable;
  for (int b = 0; b < 256; ++b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) {
      printable.push_back(static_cast<uint8_t>(b));
    }
  }
  const int64_t n_pairs = static_cast<int64_t>(printable.size() * printable.size());
  const int64_t most = 256 + n_pairs + n_pairs * static_cast<int64_t>(printable.size());
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
  for (size_t i = 0; i < printable.size() && id < vocab_size; ++i) {
    for (size_t j = 0; j < printable.size() && id < vocab_size; ++j, ++id) {
      const std::string a(alpha.Utf8Of(printable[i])), b(alpha.Utf8Of(printable[j]));
      text_of[id] = a + b;
      vocab[text_of[id]] = id;
      merges.push_back(a + " " + b);
    }
  }
  // Past the pairs (GLM-5's 154,880 ids): three-character tokens, each a pair merged with one
  // more printable byte, pairs in id order.
  for (int32_t pair = 256; pair < 256 + n_pairs && id < vocab_size; ++pair) {
    for (size_t j = 0; j < printable.size() && id < vocab_size; ++j, ++id) {
      const std::string c(alpha.Utf8Of(printable[j]));
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
  const nlohmann::json j = {{"version", "1.0"},
                            {"truncation", nullptr},
                            {"padding", nullptr},
                            {"added_tokens", added},
                            {"normalizer", nullptr},
                            {"pre_tokenizer", byte_level},
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
