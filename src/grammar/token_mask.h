// Token masks: which vocabulary tokens may come next in a matcher's state. Tokens are byte
// strings (byte-level BPE: one token may span several grammar terminals or end inside a UTF-8
// character), kept in a trie walked byte by byte against the grammar.
//
// The walk is cached per grammar position. From a stack top at element p, most tokens are
// decided by p's own rule alone: those it consumes completely (allowed whatever lies below
// on the stack) and those it rejects before the rule could even end (refused everywhere).
// Only the tokens that run past the end of the rule need the real stack; they are listed and
// checked one by one at each step. So a step costs an OR of cached sets plus a few exact
// checks, instead of a walk of the whole vocabulary (the idea XGrammar calls adaptive token
// mask caching).
//
// Thread-safety: VocabIndex and CompiledGrammar are shared and safe to use from many threads
// (CompiledGrammar's cache is locked); a TokenMatcher belongs to one request.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace mx::grammar {

// The vocabulary as bytes, with its end-of-sequence ids, in a trie.
class VocabIndex {
 public:
  // token_bytes[id]: the bytes the token adds to the text; an empty string, or an id listed
  // in `never`, is never allowed (special tokens other than EOS). eos_ids end the output and
  // are allowed exactly when the grammar can end.
  VocabIndex(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids,
             const std::vector<int32_t>& never);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<int32_t>& eos_ids() const { return eos_; }
  bool IsEos(int32_t id) const;

  // The trie in preorder: node i has byte_[i] (at depth depth_[i]), its subtree is
  // [i, end_[i]), and the tokens ending at it are toks_[first_[i] .. first_[i + 1]).
  struct Trie {
    std::vector<uint8_t> byte;
    std::vector<uint16_t> depth;
    std::vector<uint32_t> end;
    std::vector<uint32_t> first;  // size nodes + 1
    std::vector<int32_t> toks;    // by bytes, lexicographically
    uint16_t max_depth = 0;
  };
  const Trie& trie() const { return trie_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_;
  Trie trie_;
};

// A bitmask over the vocabulary.
class TokenBitmask {
 public:
  void Reset(int32_t n) { words_.assign((static_cast<size_t>(n) + 63) / 64, 0); }
  void Set(int32_t id) { words_[id >> 6] |= uint64_t{1} << (id & 63); }
  bool Test(int32_t id) const { return (words_[id >> 6] >> (id & 63)) & 1; }
  void Or(const std::vector<uint64_t>& w) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= w[i];
  }
  int64_t Count() const;
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  std::vector<uint64_t> words_;
};

// What one grammar position decides by itself (see the file comment).
struct PositionMasks {
  std::vector<int32_t> accepted;       // sparse form, when few
  std::vector<uint64_t> accepted_set;  // dense form, when many (then `accepted` is empty)
  std::vector<int32_t> uncertain;      // need the real stack
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabIndex> v);
  const std::shared_ptr<const Grammar>& grammar() const { return g_; }
  const VocabIndex& vocab() const { return *v_; }
  // Computed on first use, then shared.
  std::shared_ptr<const PositionMasks> Masks(uint32_t pos) const;

 private:
  std::shared_ptr<PositionMasks> Compute(uint32_t pos) const;
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const VocabIndex> v_;
  mutable std::mutex mu_;
  mutable std::unordered_map<uint32_t, std::shared_ptr<const PositionMasks>> cache_;
};

// One request's matcher over token ids.
class TokenMatcher {
 public:
  explicit TokenMatcher(std::shared_ptr<const CompiledGrammar> cg);

  // The tokens allowed next (EOS exactly when the grammar can end; only EOS once complete).
  void FillMask(TokenBitmask* mask);
  // Advances by `id`; false (nothing changes) when it is not allowed. EOS is accepted when the
  // grammar can end and makes the matcher terminated.
  bool AcceptToken(int32_t id);
  void Rollback(int n_tokens);
  bool CanEnd() const { return m_.CanEnd(); }
  bool Terminated() const { return terminated_; }
  const VocabIndex& vocab() const { return cg_->vocab(); }
  // No byte can follow: only EOS remains.
  bool Complete() const { return m_.Complete(); }

 private:
  std::shared_ptr<const CompiledGrammar> cg_;
  Matcher m_;
  bool terminated_ = false;
  std::vector<uint32_t> seen_pos_;
};

// Sets every logit whose token `mask` excludes to -inf.
void ApplyTokenMask(const TokenBitmask& mask, std::span<float> logits);

}  // namespace mx::grammar
