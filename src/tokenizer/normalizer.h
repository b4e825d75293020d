// tokenizer.json "normalizer": null, NFC, or a Sequence of those. Any other type is an
// Unimplemented error that names it (never silently skipped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace mx::tok {

class Normalizer {
 public:
  enum class Kind { kNfc };

  // `j` is the "normalizer" value (may be null); `where` names it in errors ("normalizer").
  static Result<Normalizer> FromJson(const nlohmann::json& j, const std::string& where);

  bool is_identity() const { return steps_.empty(); }
  // REQUIRES: s is valid UTF-8.
  std::string Apply(std::string_view s) const;

 private:
  std::vector<Kind> steps_;  // a Sequence, flattened
};

}  // namespace mx::tok
