// Stop strings matched on the decoded text, across token boundaries: the output tokens are fed
// through a streaming detokenizer and each stop string is searched in the text that the newest
// token completed (plus the tail before it that a match could start in).
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

class StopMatcher {
 public:
  struct Match {
    std::string stop;    // the stop string that matched
    int32_t trim_bytes;  // bytes at the end of the decoded output from the match on
  };

  StopMatcher(const tok::Tokenizer& tokenizer, std::vector<std::string> stops);

  // Feeds one output token; the first stop string found (earliest position) or nullopt.
  std::optional<Match> Push(int32_t token);

 private:
  tok::StreamingDetokenizer detok_;
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string text_;
};

}  // namespace mx
