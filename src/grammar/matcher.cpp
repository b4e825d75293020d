// StackArena closure and the Matcher's history.
#include "grammar/matcher.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace mx::grammar {

StackArena::StackArena(const Grammar& g) : g_(g) {
  nodes_.push_back({0, kRoot});  // kRoot
  nodes_.push_back({0, kCut});   // kCut
}

void StackArena::KeyMap::Rehash(size_t cap) {
  std::vector<Slot> old(cap, Slot{0, 0, 0});
  old.swap(slots_);
  const uint32_t live = epoch_;
  epoch_ = 1;
  count_ = 0;
  for (const Slot& x : old) {
    if (x.stamp == live) Insert(x.key, x.val);
  }
}

void StackArena::KeyMap::Clear() {
  count_ = 0;
  if (++epoch_ == 0) {  // wrapped: forget every stamp
    for (Slot& x : slots_) x.stamp = 0;
    epoch_ = 1;
  }
}

std::pair<uint32_t*, bool> StackArena::KeyMap::Insert(uint64_t key, uint32_t v) {
  if ((count_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
  const size_t mask = slots_.size() - 1;
  // The product's top bits: its low bits depend only on the key's low bits (the node below),
  // which every key of one call frame shares.
  const int shift = 64 - std::countr_zero(slots_.size());
  for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift;; i = (i + 1) & mask) {
    Slot& x = slots_[i];
    if (x.stamp != epoch_) {
      x = {key, v, epoch_};
      ++count_;
      return {&x.val, true};
    }
    if (x.key == key) return {&x.val, false};
  }
}

uint32_t StackArena::Make(uint32_t pos, uint32_t below) {
  const uint64_t key = (uint64_t{pos} << 32) | below;
  auto [slot, fresh] = seen_.Insert(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({pos, below});
  return *slot;
}

uint32_t StackArena::Push(uint32_t pos, uint32_t below) {
  nodes_.push_back({pos, below});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void StackArena::Close(State* out) {
  int64_t steps = 0;
  while (!work_.empty()) {
    const Node n = work_.back();
    work_.pop_back();
    if (++steps > kMaxClosureSteps) {
      out->overflow = true;
      out->tops.clear();
      out->can_end = out->cut = false;
      work_.clear();
      return;
    }
    const Elem& e = g_.elems[n.pos];
    const uint64_t key = (uint64_t{n.pos} << 32) | n.below;
    if (e.kind == Elem::kClass) {
      if (seen_.Insert(key | kTopTag, 0).second) out->tops.push_back(Make(n.pos, n.below));
    } else if (e.kind == Elem::kEnd) {
      if (n.below == kRoot) {
        out->can_end = true;
      } else if (n.below == kCut) {
        out->cut = true;
      } else if (seen_.Insert(uint64_t{n.below} | kPopTag, 0).second) {
        work_.push_back(nodes_[n.below]);
      }
    } else if (seen_.Insert(key | kCallTag, 0).second) {
      // A reference: return to the next element, or straight to the caller when it ends the
      // alternative (a tail call).
      const uint32_t ret =
          g_.elems[n.pos + 1].kind == Elem::kEnd ? n.below : Make(n.pos + 1, n.below);
      for (uint32_t s : g_.rule_alts[e.id]) work_.push_back({s, ret});
    }
  }
}

void StackArena::Begin(State* out) {
  out->tops.clear();  // keeps its capacity: states are reused step after step
  out->can_end = out->cut = out->overflow = false;
  seen_.Clear();
}

void StackArena::Start(uint32_t rule, uint32_t below, State* out) {
  Begin(out);
  for (uint32_t s : g_.rule_alts[rule]) work_.push_back({s, below});
  Close(out);
}

void StackArena::StartAt(uint32_t pos, uint32_t below, State* out) {
  Begin(out);
  work_.push_back({pos, below});
  Close(out);
}

void StackArena::Advance(const State& in, uint8_t byte, State* out) {
  Begin(out);
  for (uint32_t t : in.tops) {
    const Node& n = nodes_[t];
    if (g_.classes[g_.elems[n.pos].id].Has(byte)) work_.push_back({n.pos + 1, n.below});
  }
  Close(out);
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)), arena_(*g_) {
  states_.emplace_back();
  arena_.Start(g_->root, StackArena::kRoot, &states_.back().state);
  states_.back().arena_size = arena_.size();
}

const StackArena::State* Matcher::Run(const StackArena::State& start, std::string_view bytes) {
  const StackArena::State* in = &start;
  int k = 0;
  for (char c : bytes) {
    if (in->tops.empty()) return nullptr;
    arena_.Advance(*in, static_cast<uint8_t>(c), &scratch_[k]);
    in = &scratch_[k];
    k ^= 1;
  }
  return in->tops.empty() && !in->can_end ? nullptr : in;
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  if (bytes.empty()) return true;
  const size_t mark = arena_.size();
  const StackArena::State* s = Run(cur(), bytes);
  if (s == nullptr) {
    arena_.Truncate(mark);
    return false;
  }
  states_.push_back({*s, arena_.size()});
  return true;
}

bool Matcher::CanAccept(std::string_view bytes) {
  const size_t mark = arena_.size();
  const bool ok = Run(cur(), bytes) != nullptr;
  arena_.Truncate(mark);
  return ok;
}

bool Matcher::CanAcceptFrom(uint32_t node, std::string_view bytes) {
  const size_t mark = arena_.size();
  StackArena::State start;
  start.tops.push_back(node);
  const bool ok = Run(start, bytes) != nullptr;
  arena_.Truncate(mark);
  return ok;
}

void Matcher::Rollback(int n) {
  MX_CHECK_LE(n, history());
  states_.resize(states_.size() - static_cast<size_t>(n));
  arena_.Truncate(states_.back().arena_size);
}

}  // namespace mx::grammar
