// Streaming detokenizer: feed token ids one at a time, get back text only once it is complete
// UTF-8 (a multi-byte character is never split across two chunks). The concatenation of all
// chunks plus Finish() equals Tokenizer::Decode of the whole sequence, including U+FFFD for
// invalid bytes (a dangling incomplete character at the end of the stream is flushed as U+FFFD
// by Finish, like HF's from_utf8_lossy).
//
// Thread-safety: one StreamingDetokenizer per request; it borrows the Tokenizer, which must
// outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace mx::tok {

class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Appends `id` and returns the text that became complete (often empty). Unknown ids are
  // skipped, as in Tokenizer::Decode.
  std::string Push(int32_t id);
  // Flushes what is pending (an incomplete character becomes U+FFFD) and resets the stream.
  std::string Finish();

  // Bytes held back because they may start a character that later tokens complete.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  bool first_ = true;  // for decoders that join tokens with spaces
  std::string pending_;
};

}  // namespace mx::tok
