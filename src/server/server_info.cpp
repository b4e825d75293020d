// The /get_server_info document.
#include "server/server_info.h"

#include <string_view>
#include <variant>

#include "server/metrics.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

Json Percentiles(const Histogram& h) {
  Json j{{"count", h.count()}};
  for (auto [name, q] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}}) {
    std::optional<double> v = h.Quantile(q);
    j[name] = v ? Json(*v) : Json(nullptr);
  }
  return j;
}

Json ModelJson(const ServedModel& m) {
  const ModelInfo& i = m.info;
  const EngineStats s = m.engine->Stats();
  Json j{
      {"name", m.name},
      {"dir", m.dir},
      {"architecture", i.architecture},
      {"parameters", {{"total", i.params_total}, {"active_per_token", i.params_active}}},
      {"weight_formats", i.weight_formats},
      {"kv_cache_dtype", i.kv_cache_dtype},
      {"tuned_configs", i.tuned_configs},
      {"context_window", m.engine->context_window()},
      {"chat_template", m.chat_template.has_value()},
      {"thinking_default", m.thinking_default},
  };
  // The engine's and server's figures, placed as metrics.h's table says.
  for (const ModelStatRow& row : ModelStatTable()) {
    if (row.json == nullptr) continue;
    const std::string_view path = row.json;
    const size_t slash = path.find('/');
    Json& at = slash == std::string_view::npos ? j : j[std::string(path.substr(0, slash))];
    const std::string leaf(slash == std::string_view::npos ? path : path.substr(slash + 1));
    std::visit([&](const auto& v) { at[leaf] = v; }, row.value(s, m.metrics));
  }
  j["latency_seconds"] = {{"ttft", Percentiles(m.metrics.ttft)},
                          {"itl", Percentiles(m.metrics.itl)},
                          {"e2e", Percentiles(m.metrics.e2e)}};
  return j;
}

// The rows the web page shows in its totals line: key (the field), label, path in a model.
Json WebTotals() {
  Json list = Json::array();
  for (const ModelStatRow& row : ModelStatTable()) {
    if (row.web == nullptr || row.json == nullptr) continue;
    const std::string_view path = row.json;
    const size_t slash = path.find('/');
    list.push_back(
        {{"key", std::string(slash == std::string_view::npos ? path : path.substr(slash + 1))},
         {"label", row.web},
         {"path", row.json},
         {"help", row.help}});
  }
  return list;
}

}  // namespace

Json ServerInfoJson(const ServerState& state,
                    const std::vector<std::unique_ptr<ServedModel>>& models) {
  Json list = Json::array();
  if (state.ready) {
    for (const auto& m : models) list.push_back(ModelJson(*m));
  }
  return Json{{"server", "mxserve"},
              {"version", MX_VERSION},
              {"ready", state.ready},
              {"draining", state.draining},
              {"auth", state.auth},
              {"uptime_seconds", state.uptime_seconds},
              {"default_model", state.default_model},
              {"models", std::move(list)},
              {"totals", WebTotals()}};
}

}  // namespace mx::server
