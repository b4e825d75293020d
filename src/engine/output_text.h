// A request's output text, decoded once: its output tokens go through one streaming
// detokenizer (the engine's, on the loop thread), each token's completed text goes to the
// consumer with the chunk (GenerationChunk::text), and the request's stop strings are searched
// in that text across token boundaries (in what the newest token completed plus the tail before
// it that a match could start in). The server shows these pieces and trims by the engine's
// decision; it never decodes output tokens again.
//
// Thread-safety: one per request; borrows the Tokenizer, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mx {

class OutputText {
 public:
  struct StopMatch {
    std::string stop;    // the stop string that matched
    int32_t trim_bytes;  // bytes at the end of the text pushed so far, from the match on
  };
  struct Piece {
    std::string text;               // what this token completed (whole UTF-8 characters)
    std::optional<StopMatch> stop;  // the first stop string now in the text (earliest)
  };

  OutputText(const tok::Tokenizer& tokenizer, std::vector<std::string> stops);

  // Decodes one output token (special tokens included: the consumer decides what to show).
  Piece Push(int32_t token);
  // What the detokenizer still holds (an incomplete character becomes U+FFFD), at the end.
  std::string Finish();

 private:
  tok::StreamingDetokenizer detok_;
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string tail_;  // the last max_len_ - 1 bytes of text at most: where a match may begin
};

}  // namespace mx
