// GET /get_server_info (sglang's route name): one JSON object with what an operator glances
// at, per served model: what it is (architecture, parameters, weight formats, KV dtype, tuned
// configs), the engine's live state (requests, KV pages, radix cache, speculative accept
// length), its token counters and TTFT / inter-token / end-to-end latency percentiles since
// start. Rates (tok/s) are left to the reader: two samples of the counters give them. The web
// page (webui.h) polls it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/served_model.h"

namespace mx::server {

struct ServerState {
  bool ready = false;
  bool draining = false;
  bool auth = false;  // --api-key is set
  double uptime_seconds = 0;
  std::string default_model;
};

nlohmann::ordered_json ServerInfoJson(const ServerState& state,
                                      const std::vector<std::unique_ptr<ServedModel>>& models);

}  // namespace mx::server
