// Logging through spdlog. One process-wide logger configured once by the CLI
// (`--log-level trace|debug|info|warn|error|off`); modules call MX_LOG_* only.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

#include "base/status.h"

namespace mx {

// Sets the global level from a name; unknown names are an InvalidArgument listing the valid ones.
Status SetLogLevel(const std::string& name);

}  // namespace mx

#define MX_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define MX_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define MX_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define MX_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define MX_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
