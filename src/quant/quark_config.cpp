// Quark quantization_config writer and reader (see quark_config.h).
#include "quant/quark_config.h"

namespace mx::quant {

nlohmann::ordered_json MakeQuarkConfig(ScaleMode mode, const std::vector<std::string>& exclude) {
  using J = nlohmann::ordered_json;
  J weight = {{"dtype", "fp4"},
              {"is_dynamic", false},
              {"qscheme", "per_group"},
              {"ch_axis", -1},
              {"group_size", 32},
              {"symmetric", nullptr},
              {"round_method", "half_even"},
              {"scale_type", "float"},
              {"scale_format", "e8m0"},
              {"scale_calculation_mode", ScaleModeName(mode)},
              {"mx_element_dtype", nullptr},
              {"observer_cls", "PerBlockMXObserver"},
              {"is_scale_quant", false}};
  J global = {{"input_tensors", nullptr},
              {"output_tensors", nullptr},
              {"weight", weight},
              {"bias", nullptr},
              {"target_device", nullptr}};
  return J{{"quant_method", "quark"},
           {"global_quant_config", global},
           {"exclude", exclude},
           {"algo_config", nullptr},
           {"softmax_quant_spec", nullptr},
           {"layer_type_quant_config", J::object()},
           {"layer_quant_config", J::object()},
           {"kv_cache_quant_config", J::object()},
           {"quant_mode", "eager_mode"},
           {"version", "mxserve-" MX_VERSION},
           {"export",
            {{"kv_cache_group", J::array()},
             {"min_kv_scale", 0.0},
             {"pack_method", "reorder"},
             {"weight_format", "real_quantized"},
             {"weight_merge_groups", nullptr}}}};
}

Result<QuantConfigInfo> ParseQuantConfig(std::string_view json_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("quantization_config: not JSON: {}", e.what());
  }
  if (!j.is_object()) return InvalidArgument("quantization_config: not an object");
  QuantConfigInfo info;
  if (j.contains("quant_method") && j["quant_method"].is_string()) {
    info.quant_method = j["quant_method"].get<std::string>();
  }
  auto names = [&](const char* field) -> Status {
    if (!j.contains(field) || j[field].is_null()) return Status::Ok();
    if (!j[field].is_array()) return InvalidArgument("quantization_config.{}: not a list", field);
    for (const auto& e : j[field]) {
      if (!e.is_string()) {
        return InvalidArgument("quantization_config.{}: entry {} is not a string", field, e.dump());
      }
      info.exclude.push_back(e.get<std::string>());
    }
    return Status::Ok();
  };
  MX_RETURN_IF_ERROR(names("exclude"));
  if (info.quant_method == "fp8") {
    MX_RETURN_IF_ERROR(names("ignored_layers"));
    MX_RETURN_IF_ERROR(names("modules_to_not_convert"));
    if (j.contains("weight_block_size") && !j["weight_block_size"].is_null()) {
      const auto& b = j["weight_block_size"];
      bool ok = b.is_array() && b.size() == 2;
      for (size_t i = 0; ok && i < 2; ++i) ok = b[i].is_number_integer() && b[i].get<int64_t>() > 0;
      if (!ok) {
        return InvalidArgument(
            "quantization_config.weight_block_size: {} is not a list of two positive integers",
            b.dump());
      }
      info.weight_block_size = {b[0].get<int64_t>(), b[1].get<int64_t>()};
    }
    info.fp8_fmt = "e4m3";
    if (j.contains("fmt") && !j["fmt"].is_null()) {
      if (!j["fmt"].is_string()) return InvalidArgument("quantization_config.fmt: not a string");
      info.fp8_fmt = j["fmt"].get<std::string>();
    }
    return info;
  }
  if (info.quant_method != "quark") return info;
  const auto g = j.find("global_quant_config");
  if (g == j.end() || !g->is_object()) return info;
  const auto w = g->find("weight");
  if (w == g->end() || w->is_null()) return info;
  const nlohmann::json& spec = w->is_array() ? (w->empty() ? nlohmann::json() : (*w)[0]) : *w;
  if (!spec.is_object()) return info;
  const std::string dtype = spec.value("dtype", "");
  const std::string elem = spec.contains("mx_element_dtype") && spec["mx_element_dtype"].is_string()
                               ? spec["mx_element_dtype"].get<std::string>()
                               : "";
  if (dtype == "fp4" || (dtype == "mx" && elem == "fp4")) {
    const int64_t gs = spec.contains("group_size") && spec["group_size"].is_number_integer()
                           ? spec["group_size"].get<int64_t>()
                           : 32;
    if (gs != 32) {
      return InvalidArgument(
          "quantization_config.global_quant_config.weight.group_size: {} "
          "(MXFP4 needs 32)",
          gs);
    }
    info.weight_mxfp4 = true;
    if (spec.contains("scale_calculation_mode") && spec["scale_calculation_mode"].is_string()) {
      auto m = ParseScaleMode(spec["scale_calculation_mode"].get<std::string>());
      if (m.ok()) info.scale_mode = *m;
    }
  }
  return info;
}

}  // namespace mx::quant
