// Routing policies and the router's approximate prefix tree.
#include "parallel/dp_router.h"

#include <algorithm>
#include <queue>

#include "base/check.h"

namespace mx {

Result<LoadBalanceMethod> ParseLoadBalanceMethod(std::string_view name) {
  for (LoadBalanceMethod m : {LoadBalanceMethod::kRoundRobin, LoadBalanceMethod::kLeastLoad,
                              LoadBalanceMethod::kCacheAware}) {
    if (name == LoadBalanceMethodName(m)) return m;
  }
  return InvalidArgument(
      "--load-balance-method '{}': expected round_robin, least_load or cache_aware", name);
}

const char* LoadBalanceMethodName(LoadBalanceMethod m) {
  switch (m) {
    case LoadBalanceMethod::kRoundRobin:
      return "round_robin";
    case LoadBalanceMethod::kLeastLoad:
      return "least_load";
    case LoadBalanceMethod::kCacheAware:
      return "cache_aware";
  }
  return "?";
}

// ---- PrefixTree

struct PrefixTree::Node {
  std::vector<int32_t> key;  // tokens on the edge from the parent
  Node* parent = nullptr;
  std::map<int32_t, std::unique_ptr<Node>> children;  // by first token
  std::vector<uint64_t> used;                         // per replica: last insert tick, 0 = absent
};

PrefixTree::PrefixTree(int n_replicas, int64_t max_tokens_per_replica)
    : n_(n_replicas), max_tokens_(max_tokens_per_replica), tokens_(n_replicas, 0) {
  MX_CHECK_GE(n_replicas, 1);
  Clear();
}

PrefixTree::~PrefixTree() = default;

void PrefixTree::Clear() {
  root_ = std::make_unique<Node>();
  root_->used.assign(n_, 0);
  std::fill(tokens_.begin(), tokens_.end(), 0);
}

namespace {
size_t CommonPrefix(const std::vector<int32_t>& key, std::span<const int32_t> rest) {
  size_t i = 0;
  while (i < key.size() && i < rest.size() && key[i] == rest[i]) ++i;
  return i;
}
}  // namespace

std::vector<int64_t> PrefixTree::Match(std::span<const int32_t> prompt) const {
  std::vector<int64_t> matched(n_, 0);
  const Node* node = root_.get();
  size_t pos = 0;
  while (pos < prompt.size()) {
    auto it = node->children.find(prompt[pos]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    const size_t common = CommonPrefix(child->key, prompt.subspan(pos));
    for (int r = 0; r < n_; ++r) {
      if (child->used[r] != 0) matched[r] = static_cast<int64_t>(pos + common);
    }
    if (common < child->key.size()) break;
    pos += common;
    node = child;
  }
  return matched;
}

void PrefixTree::Insert(std::span<const int32_t> prompt, int replica) {
  MX_CHECK(replica >= 0 && replica < n_);
  const uint64_t tick = ++tick_;
  Node* node = root_.get();
  size_t pos = 0;
  auto mark = [&](Node* n) {
    if (n->used[replica] == 0) tokens_[replica] += static_cast<int64_t>(n->key.size());
    n->used[replica] = tick;
  };
  while (pos < prompt.size()) {
    auto it = node->children.find(prompt[pos]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->key.assign(prompt.begin() + pos, prompt.end());
      leaf->parent = node;
      leaf->used.assign(n_, 0);
      Node* l = leaf.get();
      node->children.emplace(prompt[pos], std::move(leaf));
      mark(l);
      break;
    }
    Node* child = it->second.get();
    const size_t common = CommonPrefix(child->key, prompt.subspan(pos));
    if (common < child->key.size()) {
      // Split the edge: `mid` takes the shared part and the child keeps the rest; both stay
      // held by the replicas that held the child (their token counts do not change).
      auto mid = std::make_unique<Node>();
      mid->key.assign(child->key.begin(), child->key.begin() + common);
      mid->parent = node;
      mid->used = child->used;
      std::unique_ptr<Node> owned = std::move(it->second);
      owned->key.erase(owned->key.begin(), owned->key.begin() + common);
      owned->parent = mid.get();
      mid->children.emplace(owned->key.front(), std::move(owned));
      Node* m = mid.get();
      it->second = std::move(mid);
      child = m;
    }
    mark(child);
    pos += common;
    node = child;
  }
  if (tokens_[replica] > max_tokens_) Evict(replica);
}

// Drops the replica's least recently used leaves until it holds at most 90 % of the cap.
void PrefixTree::Evict(int replica) {
  auto holds = [&](const Node* n) { return n->used[replica] != 0; };
  auto is_leaf = [&](const Node* n) {
    for (const auto& [t, c] : n->children) {
      if (holds(c.get())) return false;
    }
    return true;
  };
  using Item = std::pair<uint64_t, Node*>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> leaves;
  std::vector<Node*> stack = {root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& [t, c] : n->children) stack.push_back(c.get());
    if (n != root_.get() && holds(n) && is_leaf(n)) leaves.push({n->used[replica], n});
  }
  const int64_t target = max_tokens_ - max_tokens_ / 10;
  while (tokens_[replica] > target && !leaves.empty()) {
    Node* n = leaves.top().second;
    leaves.pop();
    n->used[replica] = 0;
    tokens_[replica] -= static_cast<int64_t>(n->key.size());
    Node* parent = n->parent;
    const bool unused = n->children.empty() && std::all_of(n->used.begin(), n->used.end(),
                                                           [](uint64_t u) { return u == 0; });
    if (unused) parent->children.erase(n->key.front());
    if (parent != root_.get() && holds(parent) && is_leaf(parent)) {
      leaves.push({parent->used[replica], parent});
    }
  }
}

// ---- DpRouter

DpRouter::DpRouter(int n_replicas, DpRouterOptions options)
    : n_(n_replicas), opts_(options), tree_(n_replicas, options.max_tree_tokens) {
  MX_CHECK_GE(n_replicas, 1);
}

int DpRouter::LeastLoaded(std::span<const int64_t> loads) {
  const uint64_t start = cursor_++;
  int best = static_cast<int>(start % n_);
  for (int k = 1; k < n_; ++k) {
    const int r = static_cast<int>((start + k) % n_);
    if (loads[r] < loads[best]) best = r;
  }
  return best;
}

DpRouter::Decision DpRouter::Route(std::span<const int32_t> prompt,
                                   std::span<const int64_t> loads) {
  MX_CHECK_EQ(static_cast<int>(loads.size()), n_);
  switch (opts_.method) {
    case LoadBalanceMethod::kRoundRobin:
      return {static_cast<int>(cursor_++ % n_), 0};
    case LoadBalanceMethod::kLeastLoad:
      return {LeastLoaded(loads), 0};
    case LoadBalanceMethod::kCacheAware:
      break;
  }
  const std::vector<int64_t> matched = tree_.Match(prompt);
  const int64_t min_load = *std::min_element(loads.begin(), loads.end());
  int best = -1;
  for (int r = 0; r < n_; ++r) {
    if (loads[r] - min_load > opts_.balance_abs_threshold) continue;
    if (best < 0 || matched[r] > matched[best] ||
        (matched[r] == matched[best] && loads[r] < loads[best])) {
      best = r;
    }
  }
  if (best >= 0 && matched[best] > 0 &&
      static_cast<double>(matched[best]) >=
          opts_.cache_threshold * static_cast<double>(prompt.size())) {
    return {best, matched[best]};
  }
  const int r = LeastLoaded(loads);
  return {r, matched[r]};
}

void DpRouter::Record(std::span<const int32_t> prompt, int replica) {
  if (opts_.method == LoadBalanceMethod::kCacheAware && !prompt.empty()) {
    tree_.Insert(prompt, replica);
  }
}

}  // namespace mx
