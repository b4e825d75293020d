// Which checkpoint modules a Quark `exclude` list keeps in bf16, with the aliasing that makes
// the same list work whatever naming it was written in
// (../shared/reference/mxfp4-and-fp8.md §4):
//   - an entry is an exact module name, an fnmatch glob (contains * ? or [), or "re:<regex>"
//     with Python re.match semantics (anchored at the start only, as vLLM and sglang);
//   - an exact entry also covers everything below it ("model.layers.3.mlp.experts" excludes
//     every expert leaf; sglang's fused MoE module name);
//   - a module is tested under each of its aliases: the checkpoint name, "<name>.weight", the
//     fused projection names (gate_proj/up_proj → gate_up_proj, q/k/v_proj → qkv_proj) and,
//     in the MTP layer `model.layers.{L}`, sglang's `model.decoder.X` (decoder parts) or
//     `model.X` (enorm, hnorm, eh_proj, shared_head).
// Module names are checkpoint tensor names without the trailing ".weight".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/regex.h"
#include "base/status.h"

namespace mx::quant {

class ExcludeRule {
 public:
  // Errors: InvalidArgument for an empty entry or a malformed regex (naming the entry).
  static Result<ExcludeRule> Parse(const std::string& entry);
  const std::string& text() const { return text_; }
  // Matches one name as written (no aliasing).
  bool MatchesName(const std::string& name) const;
  bool is_exact() const { return kind_ == Kind::kExact; }

 private:
  enum class Kind { kExact, kGlob, kRegex };
  Kind kind_ = Kind::kExact;
  std::string text_;
  std::shared_ptr<const Regex> re_;  // kRegex
};

class ExcludeList {
 public:
  static Result<ExcludeList> Parse(const std::vector<std::string>& entries);
  // True when some rule matches `module` under any alias. `mtp_layer` is the checkpoint index
  // of the MTP layer (num_hidden_layers), or -1 when there is none.
  bool Matches(const std::string& module, int64_t mtp_layer) const;
  // The first rule that matches, or nullptr.
  const ExcludeRule* FirstMatch(const std::string& module, int64_t mtp_layer) const;
  size_t size() const { return rules_.size(); }

 private:
  std::vector<ExcludeRule> rules_;
};

// The names `module` may be listed under (see above); the first is `module` itself.
std::vector<std::string> ModuleAliases(const std::string& module, int64_t mtp_layer);

}  // namespace mx::quant
