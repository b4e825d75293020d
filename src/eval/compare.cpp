#include "eval/compare.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "eval/scoring.h"

namespace mx::eval {

using json = nlohmann::json;

Result<json> ReadSummary(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot open", path);
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("{}: not a JSON object (expected an eval summary)", path);
  }
  for (const char* k : {"accuracy", "stderr"}) {
    if (!j.contains(k) || !j[k].is_number()) {
      return InvalidArgument("{}: \"{}\" missing or not a number", path, k);
    }
    const double v = j[k].get<double>();
    if (!(v >= 0 && v <= 1)) return InvalidArgument("{}: \"{}\" = {} outside [0, 1]", path, k, v);
  }
  for (const char* k : {"num_examples", "seeds", "errors"}) {
    if (!j.contains(k) || !j[k].is_number_integer()) {
      return InvalidArgument("{}: \"{}\" missing or not an integer", path, k);
    }
  }
  if (!j.contains("task") || !j["task"].is_string()) {
    return InvalidArgument("{}: \"task\" missing or not a string", path);
  }
  if (j.contains("protocol") && !j["protocol"].is_string()) {
    return InvalidArgument("{}: \"protocol\" is not a string", path);
  }
  return j;
}

Result<CompareRow> Compare(const json& base, const json& quant, const std::string& base_name,
                           const std::string& quant_name) {
  for (const char* k : {"task", "num_examples", "seeds"}) {
    if (base[k] != quant[k]) {
      return InvalidArgument("{} and {} differ in \"{}\" ({} vs {}): not the same eval", base_name,
                             quant_name, k, base[k].dump(), quant[k].dump());
    }
  }
  CompareRow r;
  r.task = base["task"].get<std::string>();
  r.protocol = base.value("protocol", std::string());
  r.num_examples = base["num_examples"].get<int>();
  r.seeds = base["seeds"].get<int>();
  r.base = {base["accuracy"].get<double>(), base["stderr"].get<double>()};
  r.quant = {quant["accuracy"].get<double>(), quant["stderr"].get<double>()};
  r.base_errors = base["errors"].get<int>();
  r.quant_errors = quant["errors"].get<int>();
  r.delta = r.quant.accuracy - r.base.accuracy;
  r.combined_se = CombinedStderr(r.base.stderr_, r.quant.stderr_);
  r.within = std::fabs(r.delta) <= 2 * r.combined_se + 1e-12;
  return r;
}

std::string FormatCompareTable(const std::vector<CompareRow>& rows, const std::string& base_label,
                               const std::string& quant_label) {
  std::string out = fmt::format(
      "| eval | protocol | n × seeds | {} | {} | Δ | 2·SE(Δ) | within 2·SE(Δ) |\n"
      "|---|---|---|---|---|---|---|---|\n",
      base_label, quant_label);
  for (const CompareRow& r : rows) {
    std::string errors;
    if (r.base_errors + r.quant_errors > 0) {
      errors = fmt::format(" ({} / {} request errors)", r.base_errors, r.quant_errors);
    }
    out += fmt::format(
        "| {} | {} | {} × {} | {:.1f} ± {:.1f} | {:.1f} ± {:.1f} | {:+.1f} | {:.1f} | {}{} |\n",
        r.task, r.protocol, r.num_examples, r.seeds, 100 * r.base.accuracy, 100 * r.base.stderr_,
        100 * r.quant.accuracy, 100 * r.quant.stderr_, 100 * r.delta, 200 * r.combined_se,
        r.within ? "yes" : "no", errors);
  }
  out += "\nAccuracy in %, ± one standard error; Δ = " + quant_label + " − " + base_label +
         "; SE(Δ) = sqrt(SE_b² + SE_q²); within: |Δ| ≤ 2·SE(Δ).\n";
  return out;
}

json CompareJson(const std::vector<CompareRow>& rows, const std::string& base_label,
                 const std::string& quant_label) {
  json a = json::array();
  for (const CompareRow& r : rows) {
    a.push_back({{"task", r.task},
                 {"protocol", r.protocol},
                 {"num_examples", r.num_examples},
                 {"seeds", r.seeds},
                 {"base_accuracy", r.base.accuracy},
                 {"base_stderr", r.base.stderr_},
                 {"quant_accuracy", r.quant.accuracy},
                 {"quant_stderr", r.quant.stderr_},
                 {"delta", r.delta},
                 {"combined_stderr", r.combined_se},
                 {"within_2se", r.within},
                 {"base_errors", r.base_errors},
                 {"quant_errors", r.quant_errors}});
  }
  return {{"base", base_label}, {"quant", quant_label}, {"rows", a}};
}

}  // namespace mx::eval
