// StopMatcher: incremental search over the streaming detokenizer's text.
#include "engine/stop_matcher.h"

#include <algorithm>

namespace mx {

StopMatcher::StopMatcher(const tok::Tokenizer& tokenizer, std::vector<std::string> stops)
    : detok_(tokenizer, /*skip_special_tokens=*/false), stops_(std::move(stops)) {
  std::erase(stops_, std::string());
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

std::optional<StopMatcher::Match> StopMatcher::Push(int32_t token) {
  if (stops_.empty()) return std::nullopt;
  const size_t before = text_.size();
  text_ += detok_.Push(token);
  if (text_.size() == before) return std::nullopt;
  const size_t from = before >= max_len_ ? before - max_len_ + 1 : 0;
  std::optional<Match> best;
  size_t best_pos = std::string::npos;
  for (const auto& s : stops_) {
    const size_t p = text_.find(s, from);
    if (p != std::string::npos && p < best_pos) {
      best_pos = p;
      best = Match{s, 0};
    }
  }
  if (best) {
    best->trim_bytes = static_cast<int32_t>(text_.size() - best_pos + detok_.pending_bytes());
  }
  return best;
}

}  // namespace mx
