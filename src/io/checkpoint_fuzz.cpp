// libFuzzer target for ParseCheckpointIndex (model.safetensors.index.json): any input must
// yield a Status or an index whose shard names are plain file names. Run through
// scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = mx::ParseCheckpointIndex(text, "fuzz.index.json");
  if (!r.ok()) return 0;
  for (const auto& s : r->shards) {
    if (s.empty() || s.find('/') != std::string::npos || s == "..") std::abort();
  }
  for (const auto& [name, shard] : r->weight_map) {
    (void)name;
    if (shard.empty()) std::abort();
  }
  return 0;
}
