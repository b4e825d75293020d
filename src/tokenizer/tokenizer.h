// Tokenizer: a Hugging Face tokenizer.json (byte-level BPE as used by GLM, DeepSeek, Llama-3,
// GPT-2) loaded into native tables. Encode runs: added tokens -> normalizer -> pre-tokenizer
// -> BPE; Decode runs the decoder (ByteLevel, or none = join with spaces). Every component type
// mxserve does not implement is an Unimplemented error naming it; a malformed file is a
// DataLoss naming the JSON field.
//
// Thread-safety: a loaded Tokenizer is immutable apart from an internal, locked piece cache;
// Encode/Decode may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer_added_vocab.h"

namespace mx::tok {

class Tokenizer {
 public:
  // Reads and parses `path` (a tokenizer.json). Errors name the file.
  static Result<Tokenizer> FromFile(const std::string& path);
  // Parses the text of a tokenizer.json.
  static Result<Tokenizer> FromJson(std::string_view json_text);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids for `text`, without a post-processor's template (Hugging Face
  // add_special_tokens=False, which is how chat-templated prompts are tokenized).
  // allow_special=false encodes special added tokens that occur in `text` as plain text
  // (HF encode_special_tokens=True). Invalid UTF-8 in `text` is first replaced by U+FFFD.
  std::vector<int32_t> Encode(std::string_view text, bool allow_special = true) const;

  // Text of `ids`; unknown ids are skipped (as in HF). Bytes that are not valid UTF-8 become
  // U+FFFD. skip_special drops special added tokens.
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // InvalidArgument naming the first id (and its index) that this tokenizer does not define.
  Status CheckIds(std::span<const int32_t> ids) const;

  // One more than the largest defined id (the least embedding rows a model needs).
  int32_t vocab_size() const;
  std::optional<int32_t> TokenId(std::string_view token) const;
  // The vocabulary string of `id` (byte-level alphabet for BPE tokens; added tokens' content);
  // empty for an unknown id.
  std::string_view TokenText(int32_t id) const;
  // The raw bytes `id` contributes to decoded text (may be partial UTF-8); empty if unknown.
  std::string_view TokenBytes(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  bool IsDefined(int32_t id) const;
  // True when the decoder is null: Decode joins token texts with single spaces.
  bool decoder_joins_with_space() const;

  const std::vector<AddedToken>& added_tokens() const;
  // Merge-loop work counter, for complexity tests.
  uint64_t bpe_heap_pops() const;

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mx::tok
