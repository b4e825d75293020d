// /proc/meminfo's MemAvailable.
#include "base/meminfo.h"

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace mx {

std::optional<int64_t> ParseMemAvailable(std::string_view meminfo) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string key, unit;
    int64_t kb = 0;
    if (!(f >> key) || key != "MemAvailable:") continue;
    if (!(f >> kb >> unit) || unit != "kB" || kb < 0) return std::nullopt;
    return kb * 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> AvailableMemoryBytes() {
  std::ifstream f("/proc/meminfo");
  if (!f) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return ParseMemAvailable(text);
}

}  // namespace mx
