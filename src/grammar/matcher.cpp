// StackArena closure and the Matcher's history.
#include "grammar/matcher.h"

#include "base/check.h"

namespace mx::grammar {

StackArena::StackArena(const Grammar& g) : g_(g) {
  nodes_.push_back({0, kRoot});  // kRoot
  nodes_.push_back({0, kCut});   // kCut
}

uint32_t StackArena::Make(uint32_t pos, uint32_t below) {
  const uint64_t key = (uint64_t{pos} << 32) | below;
  auto [it, fresh] = made_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({pos, below});
  return it->second;
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
      if (seen_.insert(key | kTopTag).second) out->tops.push_back(Make(n.pos, n.below));
    } else if (e.kind == Elem::kEnd) {
      if (n.below == kRoot) {
        out->can_end = true;
      } else if (n.below == kCut) {
        out->cut = true;
      } else if (seen_.insert(uint64_t{n.below} | kPopTag).second) {
        work_.push_back(nodes_[n.below]);
      }
    } else if (seen_.insert(key | kCallTag).second) {
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
  made_.clear();
  seen_.clear();
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
