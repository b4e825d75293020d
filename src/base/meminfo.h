// How much memory the machine can still give this process: MemAvailable from /proc/meminfo
// (the kernel's estimate of what can be allocated without swapping), and how much this process
// holds (VmRSS, RssAnon from /proc/self/status). The memory plan (engine/memory_plan.h) and the
// engine's KV pool are sized from the first; the loader logs the second once the weights are in.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mx {

// The value of the line "`key` <n> kB" in /proc/meminfo- or /proc/PID/status-shaped text, in
// bytes; nullopt when the line is missing or malformed. `key` includes its colon.
std::optional<int64_t> ParseKbField(std::string_view text, std::string_view key);

// MemAvailable in bytes from the text of /proc/meminfo ("MemAvailable:  123456 kB"); nullopt
// when the line is missing or malformed.
std::optional<int64_t> ParseMemAvailable(std::string_view meminfo);

// ParseMemAvailable of this machine's /proc/meminfo; nullopt where it cannot be read (not
// Linux, no procfs). Callers choose their own fallback.
std::optional<int64_t> AvailableMemoryBytes();

// This process's resident set: all of it (VmRSS: anonymous, file-backed and shared pages) and
// its anonymous part (RssAnon), in bytes; -1 each where /proc/self/status cannot say.
struct ResidentMemory {
  int64_t rss = -1;
  int64_t anon = -1;
};
ResidentMemory ProcessResidentMemory();

}  // namespace mx
