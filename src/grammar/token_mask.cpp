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

namespace {

// The accepted tokens as a bitmask when they are many.
void Densify(int32_t vocab_size, PositionMasks* m) {
  if (static_cast<int64_t>(m->accepted.size()) * 32 <= vocab_size) return;
  m->accepted_set.assign((static_cast<size_t>(vocab_size) + 63) / 64, 0);
  for (int32_t id : m->accepted) m->accepted_set[id >> 6] |= uint64_t{1} << (id & 63);
  m->accepted.clear();
  m->accepted.shrink_to_fit();
}

int64_t BytesOf(const std::string& sig, const PositionMasks& m) {
  return static_cast<int64_t>(sig.size() + 4 * (m.accepted.size() + m.uncertain.size()) +
                              8 * m.accepted_set.size());
}

}  // namespace

std::shared_ptr<const PositionMasks> SharedMasks::Find(const std::string& sig) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(sig);
  if (it == map_.end()) return nullptr;
  ++hits_;
  return it->second;
}

void SharedMasks::Put(std::string sig, std::shared_ptr<const PositionMasks> m) {
  const int64_t n = BytesOf(sig, *m);
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes_ + n > max_bytes_) return;
  if (map_.try_emplace(std::move(sig), std::move(m)).second) bytes_ += n;
}

void SharedMasks::set_max_bytes(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  max_bytes_ = n;
}

int64_t SharedMasks::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(map_.size());
}

int64_t SharedMasks::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t SharedMasks::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> g,
                                 std::shared_ptr<const VocabIndex> v, MaskCacheOptions opt)
    : g_(std::move(g)), v_(std::move(v)), opt_(opt) {}

size_t CompiledGrammar::KeyHash::operator()(const std::vector<uint32_t>& k) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint32_t x : k) h = (h ^ x) * 0x100000001B3ull + (h >> 29);
  return static_cast<size_t>(h);
}

void CompiledGrammar::KeyOf(const StackArena& arena, uint32_t top,
                            std::vector<uint32_t>* key) const {
  key->clear();
  key->push_back(arena.pos(top));
  uint32_t node = arena.below(top);
  for (int32_t k = 0; k < opt_.frames && node != StackArena::kRoot; ++k) {
    key->push_back(arena.pos(node));
    node = arena.below(node);
  }
  key->push_back(node == StackArena::kRoot ? kKeyRoot : kKeyCut);
}

std::shared_ptr<const PositionMasks> CompiledGrammar::Masks(
    const std::vector<uint32_t>& key) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  // Computed outside the lock; a race only computes the same thing twice.
  std::string sig;
  std::shared_ptr<const PositionMasks> m;
  if (opt_.share) {
    sig = Signature(key);
    if (!sig.empty()) m = v_->shared_masks().Find(sig);
  }
  if (m == nullptr) {
    if (opt_.refine && key.size() > 2) {
      std::vector<uint32_t> parent(key.begin(), key.end() - 2);
      parent.push_back(kKeyCut);
      m = Refine(key, *Masks(parent));
    } else {
      m = Compute(key);
    }
    if (!sig.empty()) v_->shared_masks().Put(std::move(sig), m);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(cache_.size()) >= opt_.max_entries) return m;
  return cache_.try_emplace(key, std::move(m)).first->second;
}

int64_t CompiledGrammar::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(cache_.size());
}

std::shared_ptr<PositionMasks> CompiledGrammar::Compute(const std::vector<uint32_t>& key) const {
  const VocabIndex::Trie& t = v_->trie();
  StackArena arena(*g_);
  const size_t depth_n = static_cast<size_t>(t.max_depth) + 1;
  std::vector<StackArena::State> st(depth_n);
  std::vector<char> cut_seen(depth_n, 0);
  std::vector<size_t> mark(depth_n, 0);
  st[0].tops.push_back(BuildStack(key, &arena));
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
    if (live || st[d].cut || st[d].can_end) {
      add_range(&out->accepted, t.first[i], t.first[i + 1]);
    } else if (cut_seen[d - 1]) {
      add_range(&out->uncertain, t.first[i], t.first[i + 1]);
    }
    if (!live) {
      // Longer tokens cannot stay inside the key's frames: after a cut they depend on the
      // stack below.
      if (cut_seen[d]) add_range(&out->uncertain, t.first[i + 1], t.first[t.end[i]]);
      i = t.end[i];
      continue;
    }
    mark[d] = arena.size();
    ++i;
  }
  Densify(v_->size(), out.get());
  return out;
}

std::shared_ptr<PositionMasks> CompiledGrammar::Refine(const std::vector<uint32_t>& key,
                                                       const PositionMasks& parent) const {
  auto out = std::make_shared<PositionMasks>();
  out->accepted = parent.accepted;
  out->accepted_set = parent.accepted_set;
  if (parent.uncertain.empty()) return out;
  const VocabIndex::Trie& t = v_->trie();
  StackArena arena(*g_);
  const size_t depth_n = static_cast<size_t>(t.max_depth) + 1;
  std::vector<StackArena::State> st(depth_n);
  std::vector<char> cut_seen(depth_n, 0);
  std::vector<size_t> mark(depth_n, 0);
  st[0].tops.push_back(BuildStack(key, &arena));
  mark[0] = arena.size();
  // The parent's uncertain tokens are sorted by bytes: consecutive ones share prefixes, whose
  // states are kept (as in TokenMatcher::CheckUncertain). Each token ends as Compute would
  // leave it at its trie node: accepted, uncertain (it ran past the key's frames) or refused.
  std::string_view prev;
  size_t valid = 0;  // st[0..valid] hold prev's prefixes
  for (int32_t id : parent.uncertain) {
    const std::string& b = v_->bytes(id);
    size_t d = 0;
    const size_t lim = std::min({valid, prev.size(), b.size()});
    while (d < lim && prev[d] == b[d]) ++d;
    arena.Truncate(mark[d]);
    bool died = false;
    for (; d < b.size(); ++d) {
      if (st[d].tops.empty()) {
        died = true;
        break;
      }
      arena.Advance(st[d], static_cast<uint8_t>(b[d]), &st[d + 1]);
      mark[d + 1] = arena.size();
      cut_seen[d + 1] = static_cast<char>(cut_seen[d] || st[d + 1].cut);
    }
    valid = d;
    prev = b;
    bool uncertain = false;
    if (died) {
      uncertain = cut_seen[d] != 0;
    } else if (st[d].Live()) {
      if (out->accepted_set.empty()) {
        out->accepted.push_back(id);
      } else {
        out->accepted_set[id >> 6] |= uint64_t{1} << (id & 63);
      }
    } else {
      uncertain = d > 0 && cut_seen[d - 1] != 0;
    }
    if (uncertain) out->uncertain.push_back(id);
  }
  Densify(v_->size(), out.get());
  return out;
}

uint32_t CompiledGrammar::BuildStack(const std::vector<uint32_t>& key, StackArena* arena) {
  // Bottom first, over kCut (or kRoot when the key is the whole stack).
  uint32_t node = key.back() == kKeyRoot ? StackArena::kRoot : StackArena::kCut;
  for (size_t k = key.size() - 1; k-- > 0;) node = arena->Push(key[k], node);
  return node;
}

std::string CompiledGrammar::Signature(const std::vector<uint32_t>& key) const {
  const Grammar& g = *g_;
  std::string s;
  std::unordered_map<uint32_t, uint32_t> number;  // rule -> its number in order met
  std::vector<uint32_t> order;
  int64_t budget = opt_.max_signature_elems;
  auto put32 = [&](uint32_t x) { s.append(reinterpret_cast<const char*>(&x), sizeof x); };
  // The elements from `pos` to the end of its alternative.
  auto seq = [&](uint32_t pos) {
    for (;; ++pos) {
      if (--budget < 0) return false;
      const Elem& e = g.elems[pos];
      if (e.kind == Elem::kEnd) {
        s.push_back('E');
        return true;
      }
      if (e.kind == Elem::kClass) {
        s.push_back('C');
        s.append(reinterpret_cast<const char*>(g.classes[e.id].bits.data()),
                 sizeof g.classes[e.id].bits);
      } else {
        const auto [it, fresh] = number.try_emplace(e.id, static_cast<uint32_t>(order.size()));
        if (fresh) order.push_back(e.id);
        s.push_back('R');
        put32(it->second);
      }
    }
  };
  for (size_t k = 0; k + 1 < key.size(); ++k) {
    if (!seq(key[k])) return {};
  }
  put32(key.back());
  for (size_t r = 0; r < order.size(); ++r) {  // grows as rules are met
    const std::vector<uint32_t>& alts = g.rule_alts[order[r]];
    s.push_back('A');
    put32(static_cast<uint32_t>(alts.size()));
    for (uint32_t a : alts) {
      if (!seq(a)) return {};
    }
  }
  return s;
}

TokenMatcher::TokenMatcher(std::shared_ptr<const CompiledGrammar> cg)
    : cg_(std::move(cg)), m_(cg_->grammar()) {}

void TokenMatcher::FillMask(TokenBitmask* mask) {
  const VocabIndex& v = cg_->vocab();
  mask->Reset(v.size());
  if (terminated_) return;
  const StackArena::State& s = m_.state();
  size_t n_seen = 0;
  for (uint32_t top : s.tops) {
    cg_->KeyOf(m_.arena(), top, &key_);
    const std::shared_ptr<const PositionMasks> pm = cg_->Masks(key_);
    // Tops with the same key share the accepted set; their uncertain tokens are checked
    // each against its own stack (the frames past the key differ).
    bool seen = false;
    for (size_t k = 0; k < n_seen && !seen; ++k) seen = seen_keys_[k] == key_;
    if (!seen) {
      if (n_seen == seen_keys_.size()) seen_keys_.emplace_back();
      seen_keys_[n_seen++] = key_;
      if (!pm->accepted_set.empty()) {
        mask->Or(pm->accepted_set);
      } else {
        for (int32_t id : pm->accepted) mask->Set(id);
      }
    }
    if (!pm->uncertain.empty()) CheckUncertain(*pm, top, mask);
  }
  if (s.can_end) {
    for (int32_t id : v.eos_ids()) {
      if (id >= 0 && id < v.size()) mask->Set(id);
    }
  }
}

// The uncertain tokens are sorted by bytes, so consecutive ones share prefixes: the states
// for the shared prefix are kept and only the rest of each token is stepped (a walk of the
// sub-trie they span); a prefix that dies skips every token that extends it.
void TokenMatcher::CheckUncertain(const PositionMasks& pm, uint32_t top, TokenBitmask* mask) {
  const VocabIndex& v = cg_->vocab();
  StackArena& arena = m_.arena();
  const size_t need = static_cast<size_t>(v.trie().max_depth) + 1;
  if (walk_.size() < need) {
    walk_.resize(need);
    marks_.resize(need);
  }
  const size_t base = arena.size();
  walk_[0].tops.assign(1, top);
  walk_[0].can_end = walk_[0].cut = walk_[0].overflow = false;
  marks_[0] = base;
  std::string_view prev;
  size_t valid = 0;  // walk_[0..valid] hold prev's prefixes
  for (int32_t id : pm.uncertain) {
    if (mask->Test(id)) continue;
    const std::string& b = v.bytes(id);
    size_t d = 0;
    const size_t lim = std::min({valid, prev.size(), b.size()});
    while (d < lim && prev[d] == b[d]) ++d;
    arena.Truncate(marks_[d]);
    bool dead = false;
    for (; d < b.size(); ++d) {
      if (walk_[d].tops.empty()) {
        dead = true;
        break;
      }
      arena.Advance(walk_[d], static_cast<uint8_t>(b[d]), &walk_[d + 1]);
      marks_[d + 1] = arena.size();
    }
    valid = d;
    prev = b;
    if (!dead && (!walk_[d].tops.empty() || walk_[d].can_end)) mask->Set(id);
  }
  arena.Truncate(base);
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
  // Word by word: a constraint allows few tokens (most words 0: 64 stores the compiler
  // vectorises) or, inside free text, most (words all ones: nothing to do), so only mixed
  // words go bit by bit. Logits past the mask's words are refused.
  const auto& w = mask.words();
  const float ninf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  float* out = logits.data();
  for (size_t wi = 0; wi * 64 < n; ++wi) {
    const uint64_t bits = wi < w.size() ? w[wi] : 0;
    const size_t lo = wi * 64, len = std::min<size_t>(64, n - lo);
    if (bits == ~uint64_t{0}) continue;
    if (bits == 0) {
      std::fill_n(out + lo, len, ninf);
      continue;
    }
    for (size_t j = 0; j < len; ++j) {
      if (!((bits >> j) & 1)) out[lo + j] = ninf;
    }
  }
}

}  // namespace mx::grammar
