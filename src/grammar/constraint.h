// The constraint kinds the API accepts, compiled once per distinct constraint and vocabulary
// (a cache keyed by kind and text) into a CompiledGrammar that requests share.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/json_schema_compiler.h"
#include "grammar/token_mask.h"

namespace mx::grammar {

// kToolCall: text is {"tools": [...], "name": NAME | null} (tool_call_grammar.h); compiled
// against the cache's tool vocabulary, which lets the tool-call tags' special tokens through.
enum class ConstraintKind { kJsonSchema, kJsonObject, kRegex, kChoice, kEbnf, kToolCall };
const char* ConstraintKindName(ConstraintKind k);  // "json_schema", "json_object", ...

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;                  // schema, regex or grammar text
  std::vector<std::string> choices;  // kChoice
  std::string Key() const;           // the cache key
};

// The grammar of a constraint; errors name what is wrong in it (and its kind).
Result<Grammar> CompileConstraint(const ConstraintSpec& spec, const JsonOptions& json,
                                  const GrammarLimits& limits);

struct GrammarCacheOptions {
  GrammarLimits limits;
  JsonOptions json;
  MaskCacheOptions masks;
  size_t capacity = 256;  // compiled grammars kept (least recently used dropped)
};

// Thread-safe.
class GrammarCache {
 public:
  // tool_vocab: for kToolCall constraints (null: `vocab`).
  GrammarCache(std::shared_ptr<const VocabIndex> vocab, GrammarCacheOptions opt = {},
               std::shared_ptr<const VocabIndex> tool_vocab = nullptr);
  Result<std::shared_ptr<const CompiledGrammar>> Get(const ConstraintSpec& spec);
  int64_t hits() const;
  int64_t misses() const;
  const std::shared_ptr<const VocabIndex>& vocab() const { return vocab_; }

 private:
  std::shared_ptr<const VocabIndex> vocab_, tool_vocab_;
  GrammarCacheOptions opt_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace mx::grammar
