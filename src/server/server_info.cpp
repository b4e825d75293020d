// The /get_server_info document.
#include "server/server_info.h"

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
  return Json{
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
      {"requests",
       {{"running", s.running},
        {"queued", s.queued},
        {"finished", s.requests_finished},
        {"aborted", s.requests_aborted},
        {"rejected", s.requests_rejected},
        {"client_disconnects", m.metrics.aborted_by_client.load()},
        {"accepted", m.metrics.requests_total.load()}}},
      {"kv_cache",
       {{"pages_used", s.kv_pages_used},
        {"pages_total", s.kv_pages_total},
        {"page_size", s.kv_page_size},
        {"usage", KvUsageRatio(s)},
        {"retractions", s.retractions}}},
      {"radix_cache",
       {{"hit_rate", CacheHitRate(s)},
        {"hit_tokens", s.radix_hit_tokens},
        {"lookups", s.radix_lookups}}},
      {"speculative",
       {{"accept_length", s.spec_accept_length_mean},
        {"drafts_proposed", s.spec_drafts_proposed},
        {"tokens_accepted", s.spec_tokens_accepted},
        {"auto", s.spec_auto},
        {"num_steps", s.spec_steps_chosen},
        {"probe", s.spec_probe},
        {"estimate_tokens_per_second", s.spec_estimate_tokens_per_s},
        {"estimate_off_tokens_per_second", s.spec_estimate_off_tokens_per_s},
        {"estimate_accept_length", s.spec_estimate_accept_length},
        {"steps_histogram", s.spec_steps_histogram},
        {"mtp_seconds", s.spec_mtp_seconds},
        {"mtp_rows", s.spec_mtp_rows}}},
      {"forward_seconds", s.forward_seconds},
      {"tokens",
       {{"prompt_total", s.prompt_tokens_total},
        {"generation_total", s.generation_tokens_total},
        {"cached_prompt_total", s.cached_prompt_tokens_total}}},
      {"latency_seconds",
       {{"ttft", Percentiles(m.metrics.ttft)},
        {"itl", Percentiles(m.metrics.itl)},
        {"e2e", Percentiles(m.metrics.e2e)}}},
  };
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
              {"models", std::move(list)}};
}

}  // namespace mx::server
