// The byte-level matcher: a nondeterministic pushdown machine over a Grammar. A state is a
// set of stacks whose tops all point at a byte class (every reference already expanded, every
// finished alternative already returned from); accepting a byte keeps the stacks whose class
// holds it, steps past it and expands again. Stacks are linked nodes in an arena, shared
// between states, so a step costs what changes, not the depth; a reference that ends its
// alternative reuses its caller's node (a tail call), so `x*` runs in constant depth.
// History is kept per AcceptBytes call, so speculative tokens can be rolled back.
//
// Thread-safety: one Matcher per request; the Grammar is shared and immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace mx::grammar {

// Stack nodes: (pos of the next element, node below). Node 0 is the bottom (returning to it
// means the whole input may end), node 1 is a cut used by the token-mask cache (returning to
// it means "the rest depends on the caller").
class StackArena {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kCut = 1;
  // Expansion steps one closure may take (ambiguous grammars); past it the state is dead.
  static constexpr int64_t kMaxClosureSteps = 1 << 16;

  struct State {
    std::vector<uint32_t> tops;  // nodes whose element is a byte class
    bool can_end = false;        // a path returned to kRoot
    bool cut = false;            // a path returned to kCut
    bool overflow = false;       // the closure hit kMaxClosureSteps
    bool Live() const { return !tops.empty() || can_end || cut; }
  };

  explicit StackArena(const Grammar& g);

  // The state of `rule` called above node `below` (kRoot for the start, kCut for a cache walk).
  void Start(uint32_t rule, uint32_t below, State* out);
  // The state of element `pos` (any kind) above node `below`.
  void StartAt(uint32_t pos, uint32_t below, State* out);
  void Advance(const State& in, uint8_t byte, State* out);
  uint32_t pos(uint32_t node) const { return nodes_[node].pos; }
  uint32_t below(uint32_t node) const { return nodes_[node].below; }
  // A new node (pos, below), not shared with any other (building a stack from a cache key).
  uint32_t Push(uint32_t pos, uint32_t below);
  const Grammar& grammar() const { return g_; }
  size_t size() const { return nodes_.size(); }
  void Truncate(size_t n) { nodes_.resize(n); }

 private:
  struct Node {
    uint32_t pos;
    uint32_t below;
  };
  static constexpr uint64_t kTopTag = uint64_t{1} << 63;
  static constexpr uint64_t kCallTag = uint64_t{1} << 62;
  static constexpr uint64_t kPopTag = uint64_t{1} << 61;
  uint32_t Make(uint32_t pos, uint32_t below);
  void Begin(State* out);  // clears out and the per-closure maps
  void Close(State* out);  // expands work_ into out

  // uint64 key -> uint32 value, open addressing, cleared in O(1) by an epoch stamp: a closure
  // runs per byte of every token the mask cache walks, so clearing must not cost the capacity.
  class KeyMap {
   public:
    KeyMap() { Rehash(64); }
    void Clear();
    // The value slot of `key` and whether it was just inserted (with `v`).
    std::pair<uint32_t*, bool> Insert(uint64_t key, uint32_t v);

   private:
    void Rehash(size_t cap);
    // One slot per probe: key, value and stamp side by side (one cache line, not three).
    struct Slot {
      uint64_t key;
      uint32_t val;
      uint32_t stamp;
    };
    std::vector<Slot> slots_;
    uint32_t epoch_ = 1;
    size_t count_ = 0;
  };

  const Grammar& g_;
  std::vector<Node> nodes_;
  std::vector<Node> work_;
  // Per closure: (pos, below) -> node made, and tagged keys already expanded.
  KeyMap seen_;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g);

  // Consumes all of `bytes` or nothing: false (state unchanged) when some byte is rejected.
  bool AcceptBytes(std::string_view bytes);
  // Whether `bytes` would be accepted from the current state (nothing changes).
  bool CanAccept(std::string_view bytes);
  // Whether `bytes` are accepted starting from the single stack `node` of the current state.
  bool CanAcceptFrom(uint32_t node, std::string_view bytes);
  bool CanEnd() const { return cur().can_end; }
  // No byte can follow (the input is complete).
  bool Complete() const { return cur().tops.empty(); }
  // Undoes the last n successful AcceptBytes calls (REQUIRES: n <= history()).
  void Rollback(int n);
  int history() const { return static_cast<int>(states_.size()) - 1; }

  const StackArena::State& state() const { return cur(); }
  StackArena& arena() { return arena_; }
  const Grammar& grammar() const { return *g_; }

 private:
  const StackArena::State& cur() const { return states_.back().state; }
  // The state after `bytes` from `start`, or null when rejected (scratch: valid until the next
  // call; the arena keeps what it made).
  const StackArena::State* Run(const StackArena::State& start, std::string_view bytes);
  struct Saved {
    StackArena::State state;
    size_t arena_size;
  };
  std::shared_ptr<const Grammar> g_;
  StackArena arena_;
  std::vector<Saved> states_;
  StackArena::State scratch_[2];
};

}  // namespace mx::grammar
