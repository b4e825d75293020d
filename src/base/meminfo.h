// How much memory the machine can still give this process: MemAvailable from /proc/meminfo
// (the kernel's estimate of what can be allocated without swapping). The engine sizes its KV
// pool from it and the data-parallel group checks that its replicas fit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mx {

// MemAvailable in bytes from the text of /proc/meminfo ("MemAvailable:  123456 kB"); nullopt
// when the line is missing or malformed.
std::optional<int64_t> ParseMemAvailable(std::string_view meminfo);

// ParseMemAvailable of this machine's /proc/meminfo; nullopt where it cannot be read (not
// Linux, no procfs). Callers choose their own fallback.
std::optional<int64_t> AvailableMemoryBytes();

}  // namespace mx
