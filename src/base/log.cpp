// Log-level parsing and the stderr logger set-up.
#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace mx {

Status SetLogLevel(const std::string& name) {
  static const bool configured = [] {
    auto logger = spdlog::stderr_color_mt("mxserve");
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_default_logger(logger);
    return true;
  }();
  (void)configured;
  auto level = spdlog::level::from_str(name);
  if (level == spdlog::level::off && name != "off") {
    return InvalidArgument(
        "--log-level: unknown level '{}' (expected one of trace, debug, info, "
        "warn, error, critical, off)",
        name);
  }
  spdlog::set_level(level);
  return Status::Ok();
}

}  // namespace mx
