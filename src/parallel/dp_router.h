// The data-parallel router: picks which of N engine replicas serves a request
// (`--load-balance-method`), like sglang's `--load-balance-method` and its router's cache-aware
// policy.
//
//   round_robin  replicas in turn.
//   least_load   the replica with the fewest requests in flight (ties: in turn).
//   cache_aware  the replica whose prefix tree of prompts already sent to it matches the prompt
//                longest, when that match covers at least `cache_threshold` of the prompt
//                (0.5, sglang router's default) and that replica is not more than
//                `balance_abs_threshold` requests (32, sglang's default) busier than the least
//                loaded one; otherwise least_load. The tree is the router's approximation of
//                each replica's radix cache: token ids of prompts it was sent, capped at
//                `max_tree_tokens` per replica with least-recently-used leaves evicted first.
//
// Thread-safety: none; the owner serializes calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mx {

enum class LoadBalanceMethod { kRoundRobin, kLeastLoad, kCacheAware };

// "round_robin" | "least_load" | "cache_aware"; the error names --load-balance-method.
Result<LoadBalanceMethod> ParseLoadBalanceMethod(std::string_view name);
const char* LoadBalanceMethodName(LoadBalanceMethod m);

struct DpRouterOptions {
  LoadBalanceMethod method = LoadBalanceMethod::kRoundRobin;
  double cache_threshold = 0.5;                // matched / prompt tokens needed to follow the cache
  int64_t balance_abs_threshold = 32;          // in-flight requests above the least loaded replica
  int64_t max_tree_tokens = int64_t{1} << 22;  // per replica
};

// A radix tree of token ids shared by all replicas; each node records which replicas were sent
// a prompt through it (and when, for eviction).
class PrefixTree {
 public:
  explicit PrefixTree(int n_replicas, int64_t max_tokens_per_replica);
  ~PrefixTree();
  // Per replica: how many leading tokens of `prompt` it was sent.
  std::vector<int64_t> Match(std::span<const int32_t> prompt) const;
  // Records `prompt` as sent to `replica`, evicting that replica's oldest leaves past the cap.
  void Insert(std::span<const int32_t> prompt, int replica);
  void Clear();
  int64_t tokens(int replica) const { return tokens_[replica]; }

 private:
  struct Node;
  void Evict(int replica);
  int n_;
  int64_t max_tokens_;
  uint64_t tick_ = 0;
  std::unique_ptr<Node> root_;
  std::vector<int64_t> tokens_;  // per replica: tokens on the nodes it holds
};

class DpRouter {
 public:
  // REQUIRES: n_replicas >= 1.
  DpRouter(int n_replicas, DpRouterOptions options);

  struct Decision {
    int replica = 0;
    int64_t matched_tokens = 0;  // cache_aware: the chosen replica's tree match
  };
  // `loads`: requests in flight per replica (size n_replicas). Does not record the prompt.
  Decision Route(std::span<const int32_t> prompt, std::span<const int64_t> loads);
  // The prompt was sent to `replica` (cache_aware: enters the tree).
  void Record(std::span<const int32_t> prompt, int replica);
  // Forgets every prompt (the replicas' caches were flushed).
  void Clear() { tree_.Clear(); }
  int n_replicas() const { return n_; }
  const DpRouterOptions& options() const { return opts_; }
  const PrefixTree& tree() const { return tree_; }

 private:
  int LeastLoaded(std::span<const int64_t> loads);
  int n_;
  DpRouterOptions opts_;
  uint64_t cursor_ = 0;  // round robin, and the tie-break order of least_load
  PrefixTree tree_;
};

}  // namespace mx
