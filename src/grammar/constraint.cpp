// Constraint kinds -> grammars, and the compile cache.
#include "grammar/constraint.h"

#include "base/json_depth.h"
#include "grammar/ebnf_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/tool_call_grammar.h"

namespace mx::grammar {

const char* ConstraintKindName(ConstraintKind k) {
  switch (k) {
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kJsonObject:
      return "json_object";
    case ConstraintKind::kRegex:
      return "regex";
    case ConstraintKind::kChoice:
      return "choice";
    case ConstraintKind::kEbnf:
      return "ebnf";
    case ConstraintKind::kToolCall:
      return "tool_call";
  }
  return "?";
}

std::string ConstraintSpec::Key() const {
  std::string k = ConstraintKindName(kind);
  k += '\0';
  k += text;
  for (const std::string& c : choices) {
    k += '\0';
    k += std::to_string(c.size());
    k += ':';
    k += c;
  }
  return k;
}

Result<Grammar> CompileConstraint(const ConstraintSpec& spec, const JsonOptions& json,
                                  const GrammarLimits& limits) {
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
      return JsonSchemaGrammar(spec.text, json, limits);
    case ConstraintKind::kJsonObject:
      return JsonObjectGrammar(json, limits);
    case ConstraintKind::kRegex:
      return RegexGrammar(spec.text, limits);
    case ConstraintKind::kEbnf:
      return EbnfGrammar(spec.text, limits);
    case ConstraintKind::kToolCall: {
      if (static_cast<int64_t>(spec.text.size()) > limits.max_source_bytes) {
        return ResourceExhausted("the tools are {} bytes, over the limit {}", spec.text.size(),
                                 limits.max_source_bytes);
      }
      if (JsonNestingDepth(spec.text, 2 * limits.max_depth) > 2 * limits.max_depth) {
        return ResourceExhausted("the tools nest JSON deeper than {} levels (limit)",
                                 2 * limits.max_depth);
      }
      const auto tools = nlohmann::ordered_json::parse(spec.text, nullptr, false);
      if (tools.is_discarded()) return InvalidArgument("the tool-call constraint is not JSON");
      return ToolCallGrammar(tools, json, limits);
    }
    case ConstraintKind::kChoice: {
      if (spec.choices.empty()) return InvalidArgument("a choice list must not be empty");
      GrammarBuilder b(limits);
      int64_t bytes = 0;
      std::vector<Seq> alts;
      for (const std::string& c : spec.choices) {
        bytes += static_cast<int64_t>(c.size());
        if (bytes > limits.max_source_bytes) {
          return ResourceExhausted("the choices exceed {} bytes (limit)", limits.max_source_bytes);
        }
        alts.push_back(b.Literal(c));
      }
      const uint32_t root = b.NewRule("root");
      b.AddAlt(root, {b.Alt(std::move(alts), "choice")});
      return b.Finish(root);
    }
  }
  return InvalidArgument("unknown constraint kind");
}

GrammarCache::GrammarCache(std::shared_ptr<const VocabIndex> vocab, GrammarCacheOptions opt,
                           std::shared_ptr<const VocabIndex> tool_vocab)
    : vocab_(std::move(vocab)),
      tool_vocab_(tool_vocab ? std::move(tool_vocab) : vocab_),
      opt_(opt) {
  vocab_->shared_masks().set_max_bytes(opt_.masks.shared_max_bytes);
  tool_vocab_->shared_masks().set_max_bytes(opt_.masks.shared_max_bytes);
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const ConstraintSpec& spec) {
  const std::string key = spec.Key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compiled outside the lock: a slow schema does not hold up other requests.
  Result<Grammar> g = CompileConstraint(spec, opt_.json, opt_.limits);
  if (!g.ok()) return g.status();
  auto cg = std::make_shared<const CompiledGrammar>(
      std::make_shared<const Grammar>(std::move(g).value()),
      spec.kind == ConstraintKind::kToolCall ? tool_vocab_ : vocab_, opt_.masks);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  lru_.emplace_front(key, cg);
  index_[key] = lru_.begin();
  while (lru_.size() > opt_.capacity) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(cg);
}

int64_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t GrammarCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace mx::grammar
