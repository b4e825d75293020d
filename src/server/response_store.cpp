// LRU store of Responses API responses.
#include "server/response_store.h"

#include "server/api_error.h"

namespace mx::server {

void ResponseStore::Put(const std::string& id, StoredResponse r) {
  r.bytes = Dump(r.response).size() + Dump(r.input_items).size() + Dump(r.conversation).size() +
            id.size();
  MutexLock lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) {
    bytes_ -= it->second.value->bytes;
    lru_.erase(it->second.lru);
    slots_.erase(it);
  }
  if (r.bytes > limits_.max_bytes || limits_.max_count == 0) return;
  bytes_ += r.bytes;
  lru_.push_front(id);
  slots_[id] = Slot{std::make_shared<const StoredResponse>(std::move(r)), lru_.begin()};
  EvictLocked();
}

void ResponseStore::EvictLocked() {
  while (!lru_.empty() && (slots_.size() > limits_.max_count || bytes_ > limits_.max_bytes)) {
    auto it = slots_.find(lru_.back());
    bytes_ -= it->second.value->bytes;
    slots_.erase(it);
    lru_.pop_back();
  }
}

std::shared_ptr<const StoredResponse> ResponseStore::Get(const std::string& id) {
  MutexLock lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.value;
}

bool ResponseStore::Delete(const std::string& id) {
  MutexLock lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return false;
  bytes_ -= it->second.value->bytes;
  lru_.erase(it->second.lru);
  slots_.erase(it);
  return true;
}

size_t ResponseStore::count() const {
  MutexLock lock(mu_);
  return slots_.size();
}

size_t ResponseStore::bytes() const {
  MutexLock lock(mu_);
  return bytes_;
}

}  // namespace mx::server
