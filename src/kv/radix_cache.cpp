// RadixCache: page-granular match / split / insert / LRU leaf eviction.
#include "kv/radix_cache.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "base/check.h"

namespace mx {

RadixCache::RadixCache(int64_t page_size, PagePool& pool)
    : page_size_(page_size), pool_(pool), root_(std::make_unique<Node>()) {
  MX_CHECK_GT(page_size, 0);
  root_->lock_ref = 1;  // never evicted
}

RadixCache::~RadixCache() {
  // Return the tree's references (the pool may outlive us in tests).
  std::function<void(Node*)> drop = [&](Node* n) {
    for (auto& [k, c] : n->children) drop(c.get());
    for (int32_t p : n->pages) pool_.Unref(p);
  };
  drop(root_.get());
}

RadixCache::Key RadixCache::FirstPage(std::span<const int32_t> tokens) const {
  return Key(tokens.begin(), tokens.begin() + page_size_);
}

RadixCache::Node* RadixCache::Split(Node* node, int64_t n_pages) {
  // node = [head | tail] → new head node (n_pages) with node (tail) as its only child.
  const int64_t n_tok = n_pages * page_size_;
  auto head = std::make_unique<Node>();
  Node* h = head.get();
  h->parent = node->parent;
  h->tokens.assign(node->tokens.begin(), node->tokens.begin() + n_tok);
  h->pages.assign(node->pages.begin(), node->pages.begin() + n_pages);
  h->lock_ref = node->lock_ref;
  h->last_access = node->last_access;
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + n_tok);
  node->pages.erase(node->pages.begin(), node->pages.begin() + n_pages);
  Node* parent = node->parent;
  auto& slot = parent->children[FirstPage(h->tokens)];
  std::unique_ptr<Node> old = std::move(slot);  // == node
  node->parent = h;
  h->children[FirstPage(node->tokens)] = std::move(old);
  slot = std::move(head);
  ++node_count_;
  return h;
}

RadixCache::MatchResult RadixCache::Match(std::span<const int32_t> tokens) {
  MatchResult r;
  Node* node = root_.get();
  const uint64_t now = ++clock_;
  node->last_access = now;
  int64_t pos = 0;
  const int64_t n = static_cast<int64_t>(tokens.size()) / page_size_ * page_size_;
  while (pos < n) {
    auto it = node->children.find(FirstPage(tokens.subspan(pos)));
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    // Whole pages in common (the first one matches by construction).
    const int64_t child_pages = static_cast<int64_t>(child->pages.size());
    int64_t k = 1;
    while (k < child_pages && pos + (k + 1) * page_size_ <= n &&
           std::equal(child->tokens.begin() + k * page_size_,
                      child->tokens.begin() + (k + 1) * page_size_,
                      tokens.begin() + pos + k * page_size_)) {
      ++k;
    }
    if (k < child_pages) child = Split(child, k);
    child->last_access = now;
    r.pages.insert(r.pages.end(), child->pages.begin(), child->pages.end());
    pos += k * page_size_;
    node = child;
    if (k < child_pages) break;
  }
  r.tokens = pos;
  r.node = node;
  return r;
}

void RadixCache::Lock(Node* node) {
  for (Node* n = node; n != root_.get(); n = n->parent) {
    if (n->lock_ref++ == 0) evictable_pages_ -= static_cast<int64_t>(n->pages.size());
  }
}

void RadixCache::Unlock(Node* node) {
  for (Node* n = node; n != root_.get(); n = n->parent) {
    MX_CHECK_GT(n->lock_ref, 0);
    if (--n->lock_ref == 0) evictable_pages_ += static_cast<int64_t>(n->pages.size());
  }
}

RadixCache::InsertResult RadixCache::Insert(std::span<const int32_t> tokens,
                                            std::span<const int32_t> pages) {
  const int64_t n = static_cast<int64_t>(tokens.size()) / page_size_ * page_size_;
  MX_CHECK_GE(static_cast<int64_t>(pages.size()), n / page_size_);
  const MatchResult m = Match(tokens.first(n));
  InsertResult r{m.tokens, m.node};
  if (m.tokens == n) return r;
  auto leaf = std::make_unique<Node>();
  Node* l = leaf.get();
  l->parent = m.node;
  l->tokens.assign(tokens.begin() + m.tokens, tokens.begin() + n);
  l->pages.assign(pages.begin() + m.tokens / page_size_, pages.begin() + n / page_size_);
  l->last_access = clock_;
  for (int32_t p : l->pages) pool_.Ref(p);
  const int64_t np = static_cast<int64_t>(l->pages.size());
  cached_pages_ += np;
  evictable_pages_ += np;
  ++node_count_;
  m.node->children[FirstPage(l->tokens)] = std::move(leaf);
  r.node = l;
  return r;
}

int64_t RadixCache::Evict(int64_t n_pages) {
  auto older = [](const Node* a, const Node* b) { return a->last_access > b->last_access; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> heap(older);
  std::function<void(Node*)> collect = [&](Node* n) {
    if (n->children.empty()) {
      if (n->lock_ref == 0) heap.push(n);
      return;
    }
    for (auto& [k, c] : n->children) collect(c.get());
  };
  collect(root_.get());
  int64_t freed = 0;
  while (freed < n_pages && !heap.empty()) {
    Node* n = heap.top();
    heap.pop();
    for (int32_t p : n->pages) freed += pool_.Unref(p) ? 1 : 0;
    const int64_t np = static_cast<int64_t>(n->pages.size());
    cached_pages_ -= np;
    evictable_pages_ -= np;
    --node_count_;
    Node* parent = n->parent;
    parent->children.erase(FirstPage(n->tokens));  // destroys n
    if (parent != root_.get() && parent->children.empty() && parent->lock_ref == 0) {
      heap.push(parent);
    }
  }
  return freed;
}

bool RadixCache::CheckInvariants() const {
  int64_t cached = 0, evictable = 0, nodes = 0;
  bool ok = true;
  std::function<void(const Node*)> walk = [&](const Node* n) {
    for (const auto& [k, c] : n->children) {
      ++nodes;
      cached += static_cast<int64_t>(c->pages.size());
      if (c->lock_ref == 0) evictable += static_cast<int64_t>(c->pages.size());
      ok = ok && c->parent == n && c->lock_ref <= n->lock_ref + (n == root_.get() ? 1 << 30 : 0);
      ok = ok && c->tokens.size() == static_cast<size_t>(page_size_) * c->pages.size();
      ok = ok && !c->pages.empty() && k == FirstPage(c->tokens);
      for (int32_t p : c->pages) ok = ok && pool_.refcount(p) > 0;
      walk(c.get());
    }
  };
  walk(root_.get());
  return ok && cached == cached_pages_ && evictable == evictable_pages_ && nodes == node_count_;
}

}  // namespace mx
