// `eval compare`: the baseline-vs-quantized table from pairs of summary JSONs (tasks.h).
// A row holds base ± SE, quant ± SE, Δ = quant − base, and whether |Δ| ≤ 2·sqrt(SE_b² + SE_q²)
// (the two runs treated as independent estimates; a paired analysis of the same questions
// would be tighter, so "within" is the conservative reading).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace mx::eval {

struct Estimate {
  double accuracy = 0;
  double stderr_ = 0;
};

struct CompareRow {
  std::string task, protocol;
  int num_examples = 0, seeds = 1;
  Estimate base, quant;
  double delta = 0;        // quant − base
  double combined_se = 0;  // sqrt(SE_b² + SE_q²)
  bool within = false;     // |Δ| ≤ 2 · combined_se
  int base_errors = 0, quant_errors = 0;
};

// Reads and validates a summary written by an eval task; errors name the file and field.
Result<nlohmann::json> ReadSummary(const std::string& path);

// The two summaries must be the same task on the same number of questions and seeds.
// `base_name`/`quant_name` appear in errors.
Result<CompareRow> Compare(const nlohmann::json& base, const nlohmann::json& quant,
                           const std::string& base_name, const std::string& quant_name);

// A Markdown table, accuracies in percent with one decimal.
std::string FormatCompareTable(const std::vector<CompareRow>& rows, const std::string& base_label,
                               const std::string& quant_label);

nlohmann::json CompareJson(const std::vector<CompareRow>& rows, const std::string& base_label,
                           const std::string& quant_label);

}  // namespace mx::eval
