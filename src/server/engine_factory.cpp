// CreateServingEngine: CreateEngine when src/engine provides it (MX_HAVE_CREATE_ENGINE, set by
// src/server/CMakeLists.txt), else a clear error instead of a link failure.
#include "server/served_model.h"

namespace mx::server {

Result<std::unique_ptr<Engine>> CreateServingEngine(const EngineOptions& options) {
#if MX_HAVE_CREATE_ENGINE
  return CreateEngine(options);
#else
  return Unimplemented("this build has no engine yet (src/engine does not define CreateEngine)");
#endif
}

}  // namespace mx::server
