// Added tokens (tokenizer.json "added_tokens"): matched in the text before pre-tokenization,
// leftmost-longest, with the Hugging Face flags lstrip / rstrip / single_word / normalized.
// Thread-safe after construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/regex.h"
#include "base/status.h"
#include "tokenizer/tokenizer_util.h"

namespace mx::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens); plain text if !allow_special
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // matches only when not inside a word
  bool normalized = true;    // matched in the normalized text rather than the raw text
};

class AddedVocab {
 public:
  static Result<AddedVocab> Create(std::vector<AddedToken> tokens);

  // Splits `text` at the matches of the added tokens whose `normalized` flag equals
  // `normalized` (special ones only if allow_special). Calls on_text(segment) for text between
  // matches (non-empty) and on_token(id) for each match, in order.
  void Split(std::string_view text, bool normalized, bool allow_special,
             FunctionRef<void(std::string_view)> on_text,
             FunctionRef<void(int32_t)> on_token) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  bool IsWordChar(std::string_view text, size_t pos, bool before) const;

  std::vector<AddedToken> tokens_;
  // For each first byte, indices into tokens_ with that first byte, longest content first.
  std::array<std::vector<int>, 256> by_first_byte_;
  std::shared_ptr<const Regex> word_char_;  // [\p{L}\p{N}_] (Rust is_alphanumeric or '_')
};

}  // namespace mx::tok
