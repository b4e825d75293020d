// Radix prefix cache over KV pages (sglang's RadixCache with page_size > 1): a tree whose edges
// are token runs of whole pages, each node owning the pages that hold its tokens' KV. A request
// matches the longest cached page-aligned prefix of its tokens at admission, locks the matched
// path while it runs (locked nodes are never evicted), and inserts its tokens with its pages
// when it finishes or is retracted. Eviction drops unlocked leaves, least recently used first,
// only when pages are needed (or on Flush).
//
// Pages are reference-counted in the PagePool: the tree holds one reference per page it keeps;
// Match hands out the tree's pages (the caller takes its own references); Insert takes
// references on the pages it adopts, so the caller always drops all of its own afterwards.
//
// Thread-safety: none (the engine loop thread owns it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "kv/page_pool.h"

namespace mx {

class RadixCache {
 public:
  struct Node;

  struct MatchResult {
    int64_t tokens = 0;          // matched tokens, a multiple of page_size
    std::vector<int32_t> pages;  // tokens / page_size pages, in order
    Node* node = nullptr;        // the deepest matched node (root when nothing matched)
  };

  RadixCache(int64_t page_size, PagePool& pool);
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // The longest page-aligned prefix of `tokens` in the tree. A match that ends inside a node
  // splits it so that the result ends on a node. Refreshes the path's LRU time.
  MatchResult Match(std::span<const int32_t> tokens);

  // Lock / unlock the path from `node` to the root (nesting counts). REQUIRES: node from Match
  // or Insert of this tree and not evicted while locked (locked nodes never are).
  void Lock(Node* node);
  void Unlock(Node* node);

  // Inserts the page-aligned prefix of `tokens`; pages[i] holds tokens [i·page_size, ...).
  // REQUIRES: pages.size() >= tokens.size() / page_size. Returns the number of tokens that
  // were already cached (their pages in `pages` are not adopted) and the deepest node.
  struct InsertResult {
    int64_t existing_tokens = 0;
    Node* node = nullptr;
  };
  InsertResult Insert(std::span<const int32_t> tokens, std::span<const int32_t> pages);

  // Drops unlocked leaves in LRU order until at least `n_pages` pages became free in the pool
  // or nothing evictable is left; returns the number of pages freed.
  int64_t Evict(int64_t n_pages);
  // Evicts everything that is not locked; returns the pages freed.
  int64_t Flush() { return Evict(INT64_MAX); }

  int64_t page_size() const { return page_size_; }
  int64_t cached_pages() const { return cached_pages_; }
  // Pages in nodes no request locks (what Evict could free).
  int64_t evictable_pages() const { return evictable_pages_; }
  int64_t node_count() const { return node_count_; }

  // Internal consistency (tests): counters match a walk of the tree; every page has a reference.
  bool CheckInvariants() const;

 private:
  using Key = std::vector<int32_t>;  // one page of tokens: the child map key
  Node* Split(Node* node, int64_t n_pages);
  Key FirstPage(std::span<const int32_t> tokens) const;

  int64_t page_size_;
  PagePool& pool_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  int64_t cached_pages_ = 0;
  int64_t evictable_pages_ = 0;
  int64_t node_count_ = 0;
};

struct RadixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> tokens;                                     // a multiple of page_size
  std::vector<int32_t> pages;                                      // tokens.size() / page_size
  std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;  // by first page of tokens
  int32_t lock_ref = 0;
  uint64_t last_access = 0;
};

}  // namespace mx
