// The vocabulary trie, the per-position cache walk and per-step masks.
#include "grammar/token_mask.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"

namespace mx::grammar {

VocabIndex::VocabIndex(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids,
                       const std::vector<int32_t>& never)
    : bytes_(std::move(token_bytes)), eos_(std::move(eos_ids)) {
  std::vector<char> excluded(bytes_.size(), 0);
  for (int32_t id : never) {
    if (id >= 0 && id < size()) excluded[id] = 1;
  }
  for (int32_t id : eos_) {
    if (id >= 0 && id < size()) excluded[id] = 1;
  }
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < size(); ++id) {
    if (!excluded[id] && !bytes_[id].empty()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const std::string& x = bytes_[a];
    const std::string& y = bytes_[b];
    // Unsigned byte order, so that a prefix sorts before its extensions and bytes >= 0x80 last.
    const int c = x.compare(y);  // std::string compares as unsigned char (char_traits<char>)
    return c < 0 || (c == 0 && a < b);
  });
  Trie& t = trie_;
  t.toks = ids;
  t.byte.push_back(0);
  t.depth.push_back(0);
  t.end.push_back(0);
  t.first.push_back(0);
  std::vector<uint32_t> path = {0};
  std::string_view prev;
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string& s = bytes_[ids[k]];
    size_t l = 0;
    while (l < prev.size() && l < s.size() && prev[l] == s[l]) ++l;
    while (path.size() > l + 1) {
      t.end[path.back()] = static_cast<uint32_t>(t.byte.size());
      path.pop_back();
    }
    for (size_t d = l; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(s[d]));
      t.depth.push_back(static_cast<uint16_t>(std::min<size_t>(d + 1, 65535)));
      t.end.push_back(0);
      t.first.push_back(static_cast<uint32_t>(k));
      t.max_depth = std::max<uint16_t>(t.max_depth, t.depth.back());
    }
    prev = s;
  }
  while (!path.empty()) {
    t.end[path.back()] = static_cast<uint32_t>(t.byte.size());
    path.pop_back();
  }
  t.first.push_back(static_cast<uint32_t>(ids.size()));
}

bool VocabIndex::IsEos(int32_t id) const {
  return std::find(eos_.begin(), eos_.end(), id) != eos_.end();
}

int64_t TokenBitmask::Count() const {
  int64_t n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> g,
                                 std::shared_ptr<const VocabIndex> v)
    : g_(std::move(g)), v_(std::move(v)) {}

std::shared_ptr<const PositionMasks> CompiledGrammar::Masks(uint32_t pos) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(pos);
    if (it != cache_.end()) return it->second;
  }
  std::shared_ptr<const PositionMasks> m = Compute(pos);  // outside the lock; a race only
  std::lock_guard<std::mutex> lock(mu_);                  // computes the same thing twice
  return cache_.try_emplace(pos, std::move(m)).first->second;
}

std::shared_ptr<PositionMasks> CompiledGrammar::Compute(uint32_t pos) const {
  const VocabIndex::Trie& t = v_->trie();
  StackArena arena(*g_);
  const size_t depth_n = static_cast<size_t>(t.max_depth) + 1;
  std::vector<StackArena::State> st(depth_n);
  std::vector<char> cut_seen(depth_n, 0);
  std::vector<size_t> mark(depth_n, 0);
  arena.StartAt(pos, StackArena::kCut, &st[0]);
  mark[0] = arena.size();
  auto out = std::make_shared<PositionMasks>();
  auto add_range = [&](std::vector<int32_t>* v, uint32_t a, uint32_t b) {
    v->insert(v->end(), t.toks.begin() + a, t.toks.begin() + b);
  };
  const auto n_nodes = static_cast<uint32_t>(t.byte.size());
  for (uint32_t i = 1; i < n_nodes;) {
    const uint16_t d = t.depth[i];
    arena.Truncate(mark[d - 1]);
    arena.Advance(st[d - 1], t.byte[i], &st[d]);
    const bool live = !st[d].tops.empty();
    cut_seen[d] = cut_seen[d - 1] || st[d].cut;
    if (live || st[d].cut) {
      add_range(&out->accepted, t.first[i], t.first[i + 1]);
    } else if (cut_seen[d - 1]) {
      add_range(&out->uncertain, t.first[i], t.first[i + 1]);
    }
    if (!live) {
      // Longer tokens cannot stay inside the rule: after a cut they depend on the stack.
      if (cut_seen[d]) add_range(&out->uncertain, t.first[i + 1], t.first[t.end[i]]);
      i = t.end[i];
      continue;
    }
    mark[d] = arena.size();
    ++i;
  }
  const int32_t V = v_->size();
  if (static_cast<int64_t>(out->accepted.size()) * 32 > V) {
    out->accepted_set.assign((static_cast<size_t>(V) + 63) / 64, 0);
    for (int32_t id : out->accepted) out->accepted_set[id >> 6] |= uint64_t{1} << (id & 63);
    out->accepted.clear();
    out->accepted.shrink_to_fit();
  }
  return out;
}

TokenMatcher::TokenMatcher(std::shared_ptr<const CompiledGrammar> cg)
    : cg_(std::move(cg)), m_(cg_->grammar()) {}

void TokenMatcher::FillMask(TokenBitmask* mask) {
  const VocabIndex& v = cg_->vocab();
  mask->Reset(v.size());
  if (terminated_) return;
  const StackArena::State& s = m_.state();
  seen_pos_.clear();
  for (uint32_t top : s.tops) {
    const uint32_t pos = m_.arena().pos(top);
    const std::shared_ptr<const PositionMasks> pm = cg_->Masks(pos);
    if (std::find(seen_pos_.begin(), seen_pos_.end(), pos) == seen_pos_.end()) {
      seen_pos_.push_back(pos);
      if (!pm->accepted_set.empty()) {
        mask->Or(pm->accepted_set);
      } else {
        for (int32_t id : pm->accepted) mask->Set(id);
      }
    }
    for (int32_t id : pm->uncertain) {
      if (!mask->Test(id) && m_.CanAcceptFrom(top, v.bytes(id))) mask->Set(id);
    }
  }
  if (s.can_end) {
    for (int32_t id : v.eos_ids()) {
      if (id >= 0 && id < v.size()) mask->Set(id);
    }
  }
}

bool TokenMatcher::AcceptToken(int32_t id) {
  const VocabIndex& v = cg_->vocab();
  if (terminated_ || id < 0 || id >= v.size()) return false;
  if (v.IsEos(id)) {
    if (!m_.CanEnd()) return false;
    terminated_ = true;
    return true;
  }
  const std::string& b = v.bytes(id);
  if (b.empty()) return false;
  return m_.AcceptBytes(b);
}

void TokenMatcher::Rollback(int n_tokens) {
  if (n_tokens > 0 && terminated_) {
    terminated_ = false;
    --n_tokens;
  }
  m_.Rollback(n_tokens);
}

void ApplyTokenMask(const TokenBitmask& mask, std::span<float> logits) {
  const auto& w = mask.words();
  const float ninf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i / 64 >= w.size() || !((w[i / 64] >> (i % 64)) & 1)) logits[i] = ninf;
  }
}

}  // namespace mx::grammar
