// The plans of `serve`'s models and their JSON form.
#include "cli/serve_plan.h"

#include <nlohmann/json.hpp>

namespace mx::cli {

using nlohmann::json;

Result<std::vector<MemoryPlan>> PlanModels(
    const std::vector<std::pair<std::string, std::string>>& models, const MemoryPlanOptions& base,
    std::optional<int64_t> available) {
  std::vector<MemoryPlan> plans;
  int64_t before = 0;  // weights of the models loaded before this one
  for (const auto& [name, dir] : models) {
    MemoryPlanOptions o = base;
    o.model_name = name;
    o.model_dir = dir;
    if (available) o.available_bytes = *available - before;
    auto p = PlanMemory(o);
    if (!p.ok()) {
      return Status(p.status().code(), "model '" + name + "': " + p.status().message());
    }
    before += p->weights_bytes;
    plans.push_back(std::move(p).value());
  }
  return plans;
}

namespace {

json WeightsJson(const WeightPlan& w) {
  json formats = json::array();
  for (const WeightFormatPlan& f : w.formats) {
    formats.push_back({{"format", f.format},
                       {"where", f.where},
                       {"tensors", f.tensors},
                       {"file_bytes", f.file_bytes},
                       {"anon_bytes", f.anon_bytes},
                       {"mapped_bytes", f.mapped_bytes}});
  }
  return {{"tensors", w.tensors},
          {"file_bytes", w.file_bytes},
          {"anon_bytes", w.anon_bytes},
          {"mapped_bytes", w.mapped_bytes},
          {"largest_transient_bytes", w.largest_transient_bytes},
          {"formats", formats}};
}

json PlanJson(const MemoryPlan& p) {
  const MemoryPlanOptions& o = p.options;
  json layers = json::array();
  for (const KvLayerPlan& l : p.kv.layers) {
    layers.push_back({{"layer", l.layer},
                      {"mtp", l.mtp},
                      {"latent_values", l.latent_values},
                      {"rope_values", l.rope_values},
                      {"indexer_values", l.indexer_values},
                      {"bytes_per_token", l.bytes_per_token}});
  }
  json ranks = json::array();
  for (const RankPlan& r : p.ranks) {
    ranks.push_back({{"tp_rank", r.tp_rank},
                     {"weights", WeightsJson(r.weights)},
                     {"kv_bytes", r.kv_bytes},
                     {"scratch_bytes", r.scratch_bytes},
                     {"total_bytes", r.total_bytes()}});
  }
  return {{"name", o.model_name},
          {"model_dir", o.model_dir},
          {"architecture", p.architecture},
          {"tp", o.tp},
          {"expert_parallel", o.expert_parallel && o.tp > 1},
          {"dp", p.dp},
          {"mpi_rank", p.mpi ? json(o.mpi_rank) : json(nullptr)},
          {"kv",
           {{"dtype", p.kv.dtype},
            {"dtype_bytes", p.kv.dtype_bytes},
            {"bytes_per_token", p.kv.bytes_per_token},
            {"layers", layers},
            {"automatic", p.kv.automatic},
            {"page_size", p.kv.page_size},
            {"pages", p.kv.pages},
            {"tokens", p.kv.tokens},
            {"bytes_per_copy", p.kv.bytes}}},
          {"scratch_rows", p.scratch_rows},
          {"ranks", ranks},
          {"weights_bytes", p.weights_bytes},
          {"mapped_bytes", p.mapped_bytes},
          {"process_bytes", p.process_bytes},
          {"load_peak_bytes", p.load_peak_bytes}};
}

}  // namespace

std::string PlansJson(const std::vector<MemoryPlan>& plans, std::optional<int64_t> available,
                      const Status& fit) {
  json models = json::array();
  int64_t total = 0;
  for (const MemoryPlan& p : plans) {
    models.push_back(PlanJson(p));
    total += p.process_bytes;
  }
  const json doc = {{"models", models},
                    {"total_bytes", total},
                    {"available_bytes", available ? json(*available) : json(nullptr)},
                    {"fits", fit.ok()},
                    {"error", fit.ok() ? json(nullptr) : json(fit.message())}};
  return doc.dump(2);
}

}  // namespace mx::cli
