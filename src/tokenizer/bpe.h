// The tokenizer.json "model" of type BPE: vocabulary, ranked merges, and the merge loop that
// turns one pre-token into ids. Merging pops the lowest-ranked adjacent pair from a heap over
// a linked list of symbols: O(n log n) in the piece length, never quadratic.
// Thread-safe after construction (the piece cache is internally locked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace mx::tok {

class BpeModel {
 public:
  // `j` is the "model" object; `where` names it in errors ("model").
  static Result<BpeModel> FromJson(const nlohmann::json& j, const std::string& where);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one pre-token (UTF-8, in the vocabulary's alphabet). Characters that are
  // not in the vocabulary become byte-fallback tokens, the unk token, or are dropped (in that
  // order of preference, as in Hugging Face tokenizers).
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenId(std::string_view token) const;
  // Index = id; empty strings for ids the vocabulary does not define.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  size_t n_merges() const { return merges_.size(); }

  // Counts merge-loop heap pops since construction (for complexity tests).
  uint64_t heap_pops() const;

  static constexpr size_t kCacheCapacity = 10000;  // pieces; the cache is cleared when full
  static constexpr size_t kCacheMaxPieceBytes = 256;

 private:
  BpeModel();
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;
  int32_t CharId(std::string_view ch) const;  // -1 if not in the vocabulary

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct MergeInfo {
    int32_t rank;
    int32_t new_id;
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, MergeInfo> merges_;  // key: (left id << 32) | right id
  std::vector<int32_t> small_char_id_;              // id of code points < 1024, or -1
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;

  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace mx::tok
