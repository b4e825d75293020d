// Token masks: which vocabulary tokens may come next in a matcher's state. Tokens are byte
// strings (byte-level BPE: one token may span several grammar terminals or end inside a UTF-8
// character), kept in a trie walked byte by byte against the grammar.
//
// The walk is cached per stack suffix. From a stack top at element p with return frames
// f1..fk below it (the key: p and the positions f1..fk go on at), most tokens are decided by
// those frames alone: those accepted without popping past fk (allowed whatever lies deeper)
// and those rejected before fk could return (refused everywhere). Only the tokens that run
// past fk need the real stack; they are listed and checked one by one at each step. When the
// stack is at most k frames deep the key is the whole stack and nothing is left to check. So
// a step costs an OR of cached sets plus a few exact checks, instead of a walk of the whole
// vocabulary (the idea XGrammar calls adaptive token mask caching; keying by k frames rather
// than the top's rule alone matters for byte-level BPE: inside a JSON string the top is a
// one-character rule, and a token such as `abc",` returns through the string, the value and
// into the object before it ends, so with k = 0 nearly every token of a 150k vocabulary would
// be left to check at every step).
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

// What one stack suffix decides by itself (see the file comment).
struct PositionMasks {
  std::vector<int32_t> accepted;       // sparse form, when few
  std::vector<uint64_t> accepted_set;  // dense form, when many (then `accepted` is empty)
  std::vector<int32_t> uncertain;      // need the real stack (sorted by bytes)
};

// Masks shared by every grammar over one vocabulary, keyed by the signature of a cache key:
// the key's stack written out with every rule it can reach, renumbered in the order met, so
// two grammars that contain the same sub-grammar (a JSON string, a number: the schema
// compiler writes them alike in every schema) give the same signature. The signature is the
// whole text, not a hash, so equal signatures mean equal languages and equal masks. Bounded by
// the bytes the masks hold; past it nothing more is kept (masks stay exact).
class SharedMasks {
 public:
  std::shared_ptr<const PositionMasks> Find(const std::string& sig) const;
  void Put(std::string sig, std::shared_ptr<const PositionMasks> m);
  void set_max_bytes(int64_t n);
  int64_t size() const;
  int64_t bytes() const;
  int64_t hits() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const PositionMasks>> map_;
  int64_t bytes_ = 0;
  int64_t max_bytes_ = int64_t{256} << 20;
  mutable int64_t hits_ = 0;
};

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
  // Shared by every CompiledGrammar over this vocabulary (thread-safe).
  SharedMasks& shared_masks() const { return *shared_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_;
  Trie trie_;
  std::unique_ptr<SharedMasks> shared_ = std::make_unique<SharedMasks>();
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

struct MaskCacheOptions {
  // Return frames below the top in a cache key (0: the top's own rule alone). More frames
  // leave fewer tokens to check per step and make more distinct keys (each a vocabulary walk
  // the first time it is met).
  int32_t frames = 8;
  // Cached suffixes per compiled grammar (a client's grammar decides how many it meets); past
  // it masks are still exact, computed each time and not kept.
  int64_t max_entries = 4096;
  // A key with frames is computed from its parent (the key one frame shorter): the parent's
  // accepted and rejected tokens hold whatever lies deeper, so only its uncertain tokens are
  // walked. Off by default: the parent is computed first (recursively), and near the top of
  // a JSON string a parent's uncertain tokens are most of the vocabulary, so the chain walks
  // more than the key alone would; sharing (below) is what saves the first visits.
  bool refine = false;
  // Look keys up in the vocabulary's SharedMasks (by signature) before walking; sub-grammars
  // larger than max_signature_elems elements are not signed (kept per grammar only).
  bool share = true;
  int32_t max_signature_elems = 512;
  // The vocabulary's SharedMasks bound, set by the GrammarCache that uses it.
  int64_t shared_max_bytes = int64_t{256} << 20;
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabIndex> v,
                  MaskCacheOptions opt = {});
  const std::shared_ptr<const Grammar>& grammar() const { return g_; }
  const VocabIndex& vocab() const { return *v_; }
  const MaskCacheOptions& options() const { return opt_; }

  // The key of `top` in `arena`: its position, then the positions of up to opt.frames return
  // frames, then kKeyRoot (the stack ends there: the key is exact) or kKeyCut.
  static constexpr uint32_t kKeyRoot = 0xFFFFFFFF;
  static constexpr uint32_t kKeyCut = 0xFFFFFFFE;
  void KeyOf(const StackArena& arena, uint32_t top, std::vector<uint32_t>* key) const;
  // The masks of a key; computed on first use, then shared (up to opt.max_entries).
  std::shared_ptr<const PositionMasks> Masks(const std::vector<uint32_t>& key) const;
  int64_t cached() const;

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };
  std::shared_ptr<PositionMasks> Compute(const std::vector<uint32_t>& key) const;
  // The masks of `key` from those of its parent (see MaskCacheOptions::refine).
  std::shared_ptr<PositionMasks> Refine(const std::vector<uint32_t>& key,
                                        const PositionMasks& parent) const;
  // The key's sub-grammar written out (see SharedMasks); empty when too large.
  std::string Signature(const std::vector<uint32_t>& key) const;
  // The key's stack in `arena` (over kCut, or kRoot when the key is exact).
  static uint32_t BuildStack(const std::vector<uint32_t>& key, StackArena* arena);
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const VocabIndex> v_;
  MaskCacheOptions opt_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::vector<uint32_t>, std::shared_ptr<const PositionMasks>, KeyHash>
      cache_;
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
  // The uncertain tokens of `pm` that the single stack `top` accepts, set in *mask.
  void CheckUncertain(const PositionMasks& pm, uint32_t top, TokenBitmask* mask);

  std::shared_ptr<const CompiledGrammar> cg_;
  Matcher m_;
  bool terminated_ = false;
  std::vector<std::vector<uint32_t>> seen_keys_;
  std::vector<uint32_t> key_;
  std::vector<StackArena::State> walk_;  // CheckUncertain's states by depth
  std::vector<size_t> marks_;            // and the arena's size after each
};

// Sets every logit whose token `mask` excludes to -inf.
void ApplyTokenMask(const TokenBitmask& mask, std::span<float> logits);

}  // namespace mx::grammar
