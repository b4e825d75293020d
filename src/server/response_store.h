// The Responses API's store: responses kept (store: true) so that GET /v1/responses/{id} and
// its input_items answer, and previous_response_id continues the conversation. Bounded by a
// count and by bytes (the JSON text of what an entry holds); the least recently used entries
// are evicted first, and an entry larger than the byte bound is not kept at all.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/mutex.h"

namespace mx::server {

struct ResponseStoreLimits {
  size_t max_count = 1000;               // --responses-store-max-count (0: keep none)
  size_t max_bytes = size_t{256} << 20;  // --responses-store-max-bytes
};

struct StoredResponse {
  nlohmann::ordered_json response;      // the response object, as GET returns it
  nlohmann::ordered_json input_items;   // this request's input items, with ids
  nlohmann::ordered_json conversation;  // chat messages through this response's output,
                                        // without instructions (previous_response_id)
  size_t bytes = 0;                     // set by Put
};

class ResponseStore {
 public:
  explicit ResponseStore(ResponseStoreLimits limits) : limits_(limits) {}

  // Keeps `r` under `id` (replacing one of the same id) and evicts to the limits.
  void Put(const std::string& id, StoredResponse r);
  // nullptr when `id` is not (or no longer) stored; a hit becomes the most recently used.
  std::shared_ptr<const StoredResponse> Get(const std::string& id);
  // False when `id` is not stored.
  bool Delete(const std::string& id);

  size_t count() const;
  size_t bytes() const;

 private:
  struct Slot {
    std::shared_ptr<const StoredResponse> value;
    std::list<std::string>::iterator lru;
  };
  void EvictLocked() REQUIRES(mu_);

  const ResponseStoreLimits limits_;
  mutable Mutex mu_;
  std::list<std::string> lru_ GUARDED_BY(mu_);  // front: most recently used
  std::unordered_map<std::string, Slot> slots_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace mx::server
