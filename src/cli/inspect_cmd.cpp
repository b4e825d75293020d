// `mxserve inspect MODEL_DIR | --config config.json`: the config in brief, the expected tensor
// list, parameter and byte counts per category, active parameters per token and KV-cache bytes
// per token; from a checkpoint also each tensor's dtype and format and a check listing every
// missing, unexpected or mis-shaped tensor. `--json` for machines.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/verb.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/checkpoint_check.h"
#include "model/tensor_plan.h"
#include "model/weight_format.h"
#include "tune/moe_tuning.h"

namespace mx::cli {
namespace {

using nlohmann::json;

struct InspectArgs {
  std::string model_dir;
  std::string config;
  bool json = false;
  bool tensors = false;
  std::string tuned_config_dir;
};

// The routed experts' format as the loader will see it: from the checkpoint when there is one,
// else from config.json's quantization_config.
std::string ExpertDtype(const ModelConfig& c, const std::vector<TensorSpec>& specs,
                        const std::optional<CheckpointReport>& report) {
  if (report) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name.find(".mlp.experts.0.gate_proj.weight") == std::string::npos) continue;
      const TensorView* v = report->matches[i].view;
      const LinearFormat* f = v != nullptr ? FormatForFileDtype(v->dtype) : nullptr;
      return f != nullptr ? f->name : "f32";
    }
  }
  return c.quantization_config_json ? "mxfp4" : "bf16";
}

// Tensors and file bytes (codes and scales) per storage format.
struct FormatTotal {
  int64_t tensors = 0;
  int64_t bytes = 0;
};
std::map<std::string, FormatTotal> FormatTotals(const CheckpointReport& r) {
  std::map<std::string, FormatTotal> out;
  for (const auto& m : r.matches) {
    FormatTotal& t = out[WeightFormatName(m.format)];
    ++t.tensors;
    if (m.view != nullptr) t.bytes += static_cast<int64_t>(m.view->nbytes);
    if (m.scale != nullptr) t.bytes += static_cast<int64_t>(m.scale->nbytes);
  }
  return out;
}

std::string Billions(int64_t n) { return fmt::format("{:.2f} B", n / 1e9); }

std::string Grouped(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

std::string LayerList(const ModelConfig& c, IndexerType type) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.indexer_types[i] == type) ids.push_back(i);
  }
  return fmt::format("{}", fmt::join(ids, ","));
}

json ConfigJson(const ModelConfig& c) {
  json j;
  j["architecture"] = ArchitectureName(c.architecture);
  j["model_type"] = c.model_type;
  j["num_hidden_layers"] = c.num_hidden_layers;
  int64_t dense = 0;
  for (auto t : c.mlp_layer_types) dense += t == MlpType::kDense;
  j["dense_layers"] = dense;
  j["moe_layers"] = c.num_hidden_layers - dense;
  j["mtp_layers"] = c.num_nextn_predict_layers;
  j["hidden_size"] = c.hidden_size;
  j["vocab_size"] = c.vocab_size;
  j["num_attention_heads"] = c.num_attention_heads;
  j["q_lora_rank"] = c.q_lora_rank;
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["softmax_scale"] = c.softmax_scale();
  j["n_routed_experts"] = c.n_routed_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["n_shared_experts"] = c.n_shared_experts;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["rope_theta"] = c.rope.rope_theta;
  j["rope_type"] = c.rope.rope_type;
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (c.has_indexer) {
    std::vector<int64_t> full;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (c.indexer_types[i] == IndexerType::kFull) full.push_back(i);
    }
    j["indexer"] = {{"index_topk", c.index_topk},
                    {"index_n_heads", c.index_n_heads},
                    {"index_head_dim", c.index_head_dim},
                    {"full_layers", full},
                    {"num_full_layers", full.size()},
                    {"num_shared_layers", c.num_hidden_layers - (int64_t)full.size()},
                    {"rope_interleave", c.indexer_rope_interleave}};
  }
  j["quantization_config"] =
      c.quantization_config_json ? json::parse(*c.quantization_config_json) : json(nullptr);
  return j;
}

// Everything inspect reports, gathered once. Not movable in practice: the report points into
// the checkpoint.
struct Inspection {
  std::string config_path;
  ModelConfig c;
  std::vector<TensorSpec> specs;
  ParamSummary ps;
  KvCacheSize kv;
  std::optional<Checkpoint> ckpt;
  std::optional<CheckpointReport> report;  // with a checkpoint
  std::optional<MoeTuning> moe;            // for a MoE model
  int exit_code() const { return report && !report->ok() ? 1 : 0; }
};

Status Gather(const InspectArgs& a, Inspection& in) {
  in.config_path =
      a.config.empty() ? (std::filesystem::path(a.model_dir) / "config.json").string() : a.config;
  MX_ASSIGN_OR_RETURN(in.c, LoadModelConfig(in.config_path));
  const ModelConfig& c = in.c;
  in.specs = ExpectedTensors(c);
  in.ps = Summarize(c, in.specs);
  in.kv = KvCacheBytes(c);
  if (!a.model_dir.empty()) {
    MX_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(a.model_dir));
    in.ckpt.emplace(std::move(ck));
    in.report = CheckCheckpoint(c, in.specs, *in.ckpt);
  }
  if (c.n_routed_experts > 0) {
    MX_ASSIGN_OR_RETURN(
        MoeTuning m, ResolveMoeTuning(MoeShapeOf(c), ExpertDtype(c, in.specs, in.report),
                                      KernelLevelName(SelectKernels().level), a.tuned_config_dir));
    in.moe = std::move(m);
  }
  return Status::Ok();
}

json TensorsJson(const Inspection& in) {
  json list = json::array();
  for (size_t i = 0; i < in.specs.size(); ++i) {
    const auto& s = in.specs[i];
    json t = {{"name", s.name},
              {"shape", s.shape},
              {"dtype", DTypeName(s.dtype)},
              {"category", TensorCategoryName(s.category)}};
    if (in.report) {
      const auto& m = in.report->matches[i];
      t["format"] = WeightFormatName(m.format);
      if (m.view) {
        t["file_dtype"] = DTypeName(m.view->dtype);
        t["file_shape"] = m.view->shape;
      }
    }
    list.push_back(std::move(t));
  }
  return list;
}

json InspectJson(const InspectArgs& a, const Inspection& in) {
  const ParamSummary& ps = in.ps;
  const KvCacheSize& kv = in.kv;
  json j;
  j["source"] = in.config_path;
  j["config"] = ConfigJson(in.c);
  json by_cat = json::object();
  for (int k = 0; k < kNumTensorCategories; ++k) {
    by_cat[TensorCategoryName(static_cast<TensorCategory>(k))] = {{"params", ps.params[k]},
                                                                  {"bf16_bytes", ps.bytes[k]}};
  }
  j["parameters"] = {{"total", ps.total_params}, {"main", ps.main_params},
                     {"mtp", ps.mtp_params},     {"active_per_token", ps.active_params},
                     {"by_category", by_cat},    {"bf16_checkpoint_bytes", ps.total_bytes}};
  j["tensor_count"] = {{"total", ps.main_tensors + ps.mtp_tensors},
                       {"main", ps.main_tensors},
                       {"mtp", ps.mtp_tensors}};
  j["kv_cache_per_token"] = {{"mla_values_per_layer", kv.mla_values_per_layer},
                             {"indexer_values_per_full_layer", kv.indexer_values_per_layer},
                             {"full_indexer_layers", kv.full_indexer_layers},
                             {"values", kv.values_per_token},
                             {"bf16_bytes", kv.bf16_bytes_per_token},
                             {"fp8_bytes", kv.fp8_bytes_per_token},
                             {"mtp_values", kv.mtp_values_per_token}};
  j["tensors"] = TensorsJson(in);
  if (in.report) {
    const CheckpointReport& report = *in.report;
    std::map<std::string, int64_t> formats, format_bytes;
    for (const auto& [name, t] : FormatTotals(report)) {
      formats[name] = t.tensors;
      format_bytes[name] = t.bytes;
    }
    j["checkpoint"] = {{"dir", a.model_dir},
                       {"files", in.ckpt->num_files()},
                       {"bytes", in.ckpt->total_bytes()},
                       {"formats", formats},
                       {"format_bytes", format_bytes},
                       {"ok", report.ok()},
                       {"missing", report.missing},
                       {"mismatched", report.mismatched},
                       {"unexpected", report.unexpected},
                       {"ignored", report.ignored}};
  }
  if (in.moe) {
    j["moe_kernels"] = {{"state", in.moe->state()},
                        {"config", in.moe->file},
                        {"isa", in.moe->isa},
                        {"dtype", in.moe->dtype},
                        {"tune_command", in.moe->command}};
  }
  return j;
}

// The config in brief and the MoE kernels' tuning state.
std::string ConfigText(const Inspection& in) {
  const ModelConfig& c = in.c;
  std::string out;
  out += fmt::format("config        {}\n", in.config_path);
  out += fmt::format("architecture  {} ({})\n", ArchitectureName(c.architecture), c.model_type);
  int64_t dense = 0;
  for (auto t : c.mlp_layer_types) dense += t == MlpType::kDense;
  out += fmt::format("layers        {} ({} dense, {} MoE) + {} MTP; hidden {}; vocab {}\n",
                     c.num_hidden_layers, dense, c.num_hidden_layers - dense,
                     c.num_nextn_predict_layers, c.hidden_size, c.vocab_size);
  out +=
      fmt::format("MLA           {} heads, q_lora {}, kv_lora {}, qk {}+{}, v {}; scale {:.6g}\n",
                  c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim,
                  c.qk_rope_head_dim, c.v_head_dim, c.softmax_scale());
  if (c.has_indexer) {
    out += fmt::format("indexer       {} heads x {}, top-k {}; {} full layers {{{}}}, {} shared\n",
                       c.index_n_heads, c.index_head_dim, c.index_topk, c.num_full_indexer_layers(),
                       LayerList(c, IndexerType::kFull),
                       c.num_hidden_layers - c.num_full_indexer_layers());
  }
  out += fmt::format(
      "MoE           {} routed experts top-{}, {} shared, width {}, groups {}/{}, "
      "scale {}\n",
      c.n_routed_experts, c.num_experts_per_tok, c.n_shared_experts, c.moe_intermediate_size,
      c.n_group, c.topk_group, c.routed_scaling_factor);
  out += fmt::format("rope          theta {:g} ({}), max positions {}\n", c.rope.rope_theta,
                     c.rope.rope_type, c.max_position_embeddings);
  if (in.moe && in.moe->tuned) {
    out += fmt::format("MoE kernels   tuned config for {} on {}: {}\n", in.moe->dtype, in.moe->isa,
                       in.moe->file);
  } else if (in.moe) {
    out +=
        fmt::format("MoE kernels   DEFAULT (untuned): no {} for {} on {}\n              tune: {}\n",
                    in.moe->file, in.moe->dtype, in.moe->isa, in.moe->command);
  }
  return out;
}

// Parameters and bytes per category, and the KV cache per token.
std::string SizesText(const Inspection& in) {
  const ModelConfig& c = in.c;
  const ParamSummary& ps = in.ps;
  const KvCacheSize& kv = in.kv;
  std::string out;
  out += fmt::format("\nparameters    {} ({} main + {} MTP); active per token {}\n",
                     Billions(ps.total_params), Billions(ps.main_params), Billions(ps.mtp_params),
                     Billions(ps.active_params));
  out += fmt::format("tensors       {} ({} main + {} MTP)\n",
                     Grouped(ps.main_tensors + ps.mtp_tensors), Grouped(ps.main_tensors),
                     Grouped(ps.mtp_tensors));
  out += fmt::format("\n{:<24}{:>20}{:>20}\n", "category", "params", "bf16 bytes");
  for (int k = 0; k < kNumTensorCategories; ++k) {
    out += fmt::format("{:<24}{:>20}{:>20}\n", TensorCategoryName(static_cast<TensorCategory>(k)),
                       Grouped(ps.params[k]), Grouped(ps.bytes[k]));
  }
  out += fmt::format("{:<24}{:>20}{:>20}\n", "total", Grouped(ps.total_params),
                     Grouped(ps.total_bytes));
  out += fmt::format(
      "\nKV cache      {} values per layer ({} latent + {} rope key) + {} indexer-key "
      "values per full layer\n",
      kv.mla_values_per_layer, c.kv_lora_rank, c.qk_rope_head_dim, kv.indexer_values_per_layer);
  out += fmt::format(
      "              per token (main): {} values = {} bytes bf16, {} bytes fp8; "
      "MTP layer: {} values\n",
      Grouped(kv.values_per_token), Grouped(kv.bf16_bytes_per_token),
      Grouped(kv.fp8_bytes_per_token), kv.mtp_values_per_token);
  return out;
}

// The checkpoint's files, formats and check. REQUIRES: in.report.
std::string CheckpointText(const InspectArgs& a, const Inspection& in) {
  const CheckpointReport& report = *in.report;
  std::string out = fmt::format("\ncheckpoint    {} ({} file(s), {} bytes)\n", a.model_dir,
                                in.ckpt->num_files(), Grouped(in.ckpt->total_bytes()));
  std::string f;
  for (const auto& [name, t] : FormatTotals(report)) {
    f += fmt::format("{} {} ({} bytes)  ", name, t.tensors, Grouped(t.bytes));
  }
  out += fmt::format("formats       {}\n", f);
  if (!report.ignored.empty()) {
    out += fmt::format("ignored       {} indexer tensor(s) on IndexShare shared layers\n",
                       report.ignored.size());
  }
  out += report.ok() ? "check         OK: every expected tensor present with its shape\n"
                     : "check         FAILED\n" + report.ProblemSummary();
  return out;
}

std::string TensorsText(const Inspection& in) {
  std::string out = "\ntensors:\n";
  for (size_t i = 0; i < in.specs.size(); ++i) {
    const auto& s = in.specs[i];
    std::string fmt_col = DTypeName(s.dtype);
    if (in.report) {
      const auto& m = in.report->matches[i];
      fmt_col = m.view ? fmt::format("{} ({} {})", WeightFormatName(m.format),
                                     DTypeName(m.view->dtype), ShapeString(m.view->shape))
                       : "MISSING";
    }
    out += fmt::format("  {:<64} {:<18} {}\n", s.name, ShapeString(s.shape), fmt_col);
  }
  return out;
}

int RunInspect(const InspectArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  if (a.config.empty() == a.model_dir.empty()) {
    std::fprintf(stderr, "mxserve inspect: give exactly one of MODEL_DIR or --config FILE\n");
    return 2;
  }
  Inspection in;
  if (Status st = Gather(a, in); !st.ok()) return Fail(st.message());
  if (a.json) {
    std::printf("%s\n", InspectJson(a, in).dump(2).c_str());
    return in.exit_code();
  }
  std::string out = ConfigText(in) + SizesText(in);
  if (in.report) out += CheckpointText(a, in);
  out += a.tensors ? TensorsText(in) : "\n(--tensors lists every tensor; --json for machines)\n";
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out += fmt::format("inspected in {:.0f} ms\n", ms);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return in.exit_code();
}

VerbRun SetupInspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* sub = app.add_subcommand(
      "inspect", "Config, tensor table, parameters, bytes, KV cache and weight formats");
  sub->add_option("model_dir", args->model_dir, "Hugging Face checkpoint directory");
  sub->add_option("--config", args->config, "inspect a config.json alone (no weights)");
  sub->add_flag("--json", args->json, "machine-readable output (includes every tensor)");
  sub->add_flag("--tensors", args->tensors, "list every tensor with shape and format");
  sub->add_option("--tuned-config-dir", args->tuned_config_dir,
                  "also look for tuned MoE kernel configs here (as serve does)");
  return [args]() -> int { return RunInspect(*args); };
}

MX_REGISTER_VERB(inspect, "inspect", 40, SetupInspect);

}  // namespace
}  // namespace mx::cli
