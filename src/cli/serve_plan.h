// `serve`'s memory plan (engine/memory_plan.h) for every model it is asked to serve: made before
// anything is loaded, logged at every start, printed by --dry-run as text or --json (the fields
// are listed in docs/serving.md), and checked against the available memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/memory_plan.h"

namespace mx::cli {

// One plan per (name, dir) of `models`, in order, from `base` (the flags). Each model's
// automatic KV budget sees `available` less the weights of the models before it, as the
// engines would when they load in turn. Errors name the model.
Result<std::vector<MemoryPlan>> PlanModels(
    const std::vector<std::pair<std::string, std::string>>& models, const MemoryPlanOptions& base,
    std::optional<int64_t> available);

// The plans as one JSON document: {"models": [...], "total_bytes", "available_bytes" (null when
// unknown), "fits", "error" (null when it fits)}.
std::string PlansJson(const std::vector<MemoryPlan>& plans, std::optional<int64_t> available,
                      const Status& fit);

}  // namespace mx::cli
