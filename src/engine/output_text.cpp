// OutputText: one streaming detokenization per request, and stop strings searched in it.
#include "engine/output_text.h"

#include <algorithm>

namespace mx {

OutputText::OutputText(const tok::Tokenizer& tokenizer, std::vector<std::string> stops)
    : detok_(tokenizer, /*skip_special_tokens=*/false), stops_(std::move(stops)) {
  std::erase(stops_, std::string());
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

OutputText::Piece OutputText::Push(int32_t token) {
  Piece p{detok_.Push(token), std::nullopt};
  if (stops_.empty() || p.text.empty()) return p;
  // tail_ holds the max_len_ - 1 bytes before the new text: where a match that the new text
  // completes (or, during min_tokens, one seen before) can begin.
  tail_ += p.text;
  size_t best_pos = std::string::npos;
  for (const auto& s : stops_) {
    const size_t found = tail_.find(s);
    if (found != std::string::npos && found < best_pos) {
      best_pos = found;
      p.stop = StopMatch{s, static_cast<int32_t>(tail_.size() - found)};
    }
  }
  if (tail_.size() >= max_len_) tail_.erase(0, tail_.size() - (max_len_ - 1));
  return p;
}

std::string OutputText::Finish() { return detok_.Finish(); }

}  // namespace mx
