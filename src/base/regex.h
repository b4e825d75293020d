// A compiled PCRE2 pattern (UTF + UCP, JIT when available): the tokenizer's pre-tokenizer
// splits, and every other regex in mxserve (std::regex is not used: it is slow to run and
// its templates made each translation unit that used it take tens of seconds to compile).
// Thread-safe: matching allocates its own match data, so one Regex serves many threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/function_ref.h"
#include "base/status.h"

namespace mx {

class Regex {
 public:
  // Compiles `pattern` with PCRE2_UTF | PCRE2_UCP. A syntax error is an InvalidArgument that
  // quotes the pattern and PCRE2's message and offset.
  static Result<Regex> Compile(const std::string& pattern);
  // Escapes every metacharacter so that the result matches `literal` exactly.
  static std::string Escape(std::string_view literal);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Calls on_match(start, end) for each successive non-overlapping, non-empty match in
  // `text`, left to right (an empty match advances one character and is not reported).
  // REQUIRES: text is valid UTF-8.
  // Returns false if PCRE2 gave up (resource limit) part way; the matches so far were reported.
  bool FindAll(std::string_view text, FunctionRef<void(size_t start, size_t end)> on_match) const;
  // True if the pattern matches somewhere in text. REQUIRES: text is valid UTF-8.
  bool Search(std::string_view text) const;
  // True if the pattern matches all of `text` (anchored at both ends). When `groups` is given
  // it receives the capture groups 1..n as views into `text` (empty for an unset group).
  // Invalid UTF-8 in `text` is no match.
  bool FullMatch(std::string_view text, std::vector<std::string_view>* groups = nullptr) const;
  // True if the pattern matches at the start of `text` (Python's re.match). Invalid UTF-8 in
  // `text` is no match.
  bool MatchPrefix(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace mx
