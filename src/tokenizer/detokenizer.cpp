// Streaming detokenizer: holds back only a trailing, valid-so-far incomplete UTF-8 sequence.
#include "tokenizer/detokenizer.h"

#include "tokenizer/unicode.h"

namespace mx::tok {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamingDetokenizer::Push(int32_t id) {
  if (!tokenizer_->IsDefined(id)) return {};
  if (skip_special_ && tokenizer_->IsSpecial(id)) return {};
  if (tokenizer_->decoder_joins_with_space() && !first_) pending_.push_back(' ');
  first_ = false;
  pending_.append(tokenizer_->TokenBytes(id));
  const size_t n = EmittableUtf8Prefix(pending_);
  if (n == 0) return {};
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamingDetokenizer::Finish() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace mx::tok
