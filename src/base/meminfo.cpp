// /proc/meminfo's MemAvailable and /proc/self/status's resident set.
#include "base/meminfo.h"

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace mx {

namespace {

std::string ReadAll(const char* path) {
  std::ifstream f(path);
  if (!f) return {};
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<int64_t> ParseKbField(std::string_view text, std::string_view key) {
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string k, unit;
    int64_t kb = 0;
    if (!(f >> k) || k != key) continue;
    if (!(f >> kb >> unit) || unit != "kB" || kb < 0) return std::nullopt;
    return kb * 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseMemAvailable(std::string_view meminfo) {
  return ParseKbField(meminfo, "MemAvailable:");
}

std::optional<int64_t> AvailableMemoryBytes() {
  const std::string text = ReadAll("/proc/meminfo");
  if (text.empty()) return std::nullopt;
  return ParseMemAvailable(text);
}

ResidentMemory ProcessResidentMemory() {
  const std::string text = ReadAll("/proc/self/status");
  return {ParseKbField(text, "VmRSS:").value_or(-1), ParseKbField(text, "RssAnon:").value_or(-1)};
}

}  // namespace mx
