// libFuzzer target for ParseSafetensorsHeader: any input must yield a Status or a header
// whose every tensor lies inside the input; reading each accepted tensor's bytes lets ASan
// catch a view that escapes the buffer. Run through scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = mx::ParseSafetensorsHeader(data, size, "fuzz.safetensors");
  if (!r.ok()) {
    if (r.status().message().find("fuzz.safetensors") == std::string::npos) std::abort();
    return 0;
  }
  const auto& h = *r;
  if (h.data_start > size) std::abort();
  const uint64_t data_size = size - h.data_start;
  uint64_t prev_end = 0;
  unsigned sum = 0;
  for (const auto& t : h.tensors) {
    if (t.begin > t.end || t.end > data_size) std::abort();
    uint64_t n = mx::DTypeSize(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0) std::abort();
      n *= static_cast<uint64_t>(d);
    }
    if (n != t.end - t.begin) std::abort();
    if (t.begin != t.end) {
      if (t.begin < prev_end) std::abort();  // overlap slipped through
      prev_end = t.end;
    }
    for (uint64_t i = t.begin; i < t.end; ++i) sum += data[h.data_start + i];
  }
  return static_cast<int>(sum & 0);
}
