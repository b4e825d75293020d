// What `serve` tells the server about each model for /get_server_info and the web page
// (server::ModelInfo): read from config.json and the checkpoint's tensor headers, the same
// way `inspect` reads them. Cheap: the weights are mapped, not read.
#pragma once

#include <string>

#include "base/status.h"
#include "model/kv_store.h"
#include "server/served_model.h"

namespace mx::cli {

// Errors name the file. `kv_cache_dtype` is the engine's (EngineOptions::kv_cache_dtype).
Result<server::ModelInfo> DescribeServedModel(const std::string& dir, KvCacheDtype kv_cache_dtype);

}  // namespace mx::cli
