// tokenizer.json "pre_tokenizer": splits one text segment into the pieces that BPE encodes
// separately. Supported: ByteLevel (GPT-2 regex on/off, add_prefix_space), Split (PCRE2 regex
// or literal string; Isolated / Removed / MergedWithPrevious / MergedWithNext / Contiguous;
// invert), Digits (individual_digits), Sequence. Any other type is an Unimplemented error
// naming it. Thread-safe after construction.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/regex.h"
#include "base/status.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_util.h"

namespace mx::tok {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Applies a split behaviour to `text` given its match flags: `spans` covers text in order,
// each (start, end, is_match). Appends the non-empty resulting pieces to *out.
void ApplySplitBehavior(std::string_view text, const std::vector<std::pair<size_t, size_t>>& spans,
                        const std::vector<bool>& is_match, SplitBehavior behavior,
                        std::vector<std::string>* out);

// The GPT-2 pattern used by ByteLevel when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // `j` is the "pre_tokenizer" value (may be null: the whole segment is one piece).
  static Result<PreTokenizer> FromJson(const nlohmann::json& j, const std::string& where);

  // Splits `segment` (valid UTF-8) and calls emit(piece) for each non-empty piece in order,
  // streaming (no list of all pieces is built). Pieces after a ByteLevel step are in the
  // byte-level alphabet. A piece is only valid during its emit call.
  void Apply(std::string_view segment, FunctionRef<void(std::string_view)> emit) const;
  // The same, appending the pieces to *pieces.
  void Apply(std::string_view segment, std::vector<std::string>* pieces) const;

  // True if a ByteLevel step maps pieces to the byte-level alphabet.
  bool has_byte_level() const;

 private:
  struct Step {
    enum class Kind { kSplit, kByteLevel, kDigits } kind;
    std::shared_ptr<const Regex> regex;  // kSplit; kByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
    bool individual_digits = false;
  };
  static Status Parse(const nlohmann::json& j, const std::string& where, PreTokenizer* out);
  void Run(size_t step, std::string_view piece, FunctionRef<void(std::string_view)> emit) const;

  std::vector<Step> steps_;  // a Sequence, flattened
  std::shared_ptr<const ByteLevelAlphabet> alphabet_;
};

}  // namespace mx::tok
