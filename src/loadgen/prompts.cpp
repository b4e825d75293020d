#include "loadgen/prompts.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace mx::loadgen {
namespace {

class IdSource {
 public:
  IdSource(const tok::Tokenizer* t, int vocab_size, uint64_t seed) : rng_(seed) {
    if (t != nullptr) pool_ = CleanWordIds(*t);
    lo_ = 100;
    hi_ = std::max(vocab_size, 101);
  }
  bool has_pool() const { return !pool_.empty(); }
  int32_t Next() {
    if (!pool_.empty()) {
      std::uniform_int_distribution<size_t> d(0, pool_.size() - 1);
      return pool_[d(rng_)];
    }
    std::uniform_int_distribution<int32_t> d(lo_, hi_ - 1);
    return d(rng_);
  }
  std::vector<int32_t> Draw(int n) {
    std::vector<int32_t> v(static_cast<size_t>(std::max(n, 0)));
    for (auto& x : v) x = Next();
    return v;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::vector<int32_t> pool_;
  int32_t lo_, hi_;
  std::mt19937_64 rng_;
};

}  // namespace

std::vector<int32_t> CleanWordIds(const tok::Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.IsDefined(id) || tokenizer.IsSpecial(id)) continue;
    std::string_view b = tokenizer.TokenBytes(id);
    if (b.size() < 2 || b[0] != ' ') continue;
    bool letters = std::all_of(b.begin() + 1, b.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    });
    if (letters) ids.push_back(id);
  }
  return ids;
}

Result<PromptSet> MakePrompts(const PromptSpec& spec, const tok::Tokenizer* tokenizer) {
  if (spec.num_prompts < 0) return InvalidArgument("--num-prompts must be >= 0");
  if (spec.input_len < 1) return InvalidArgument("--random-input-len must be >= 1");
  if (spec.output_len < 1) return InvalidArgument("--random-output-len must be >= 1");
  if (spec.range_ratio < 0 || spec.range_ratio > 1) {
    return InvalidArgument("--random-range-ratio {} must be in [0, 1]", spec.range_ratio);
  }
  if (spec.shared_prefix_ratio < 0 || spec.shared_prefix_ratio >= 1) {
    return InvalidArgument("--shared-prefix-ratio {} must be in [0, 1)", spec.shared_prefix_ratio);
  }
  if (spec.num_prefix_groups < 1) return InvalidArgument("--num-prefix-groups must be >= 1");
  if (spec.text && tokenizer == nullptr) {
    return InvalidArgument("text prompts (chat endpoint) need --tokenizer MODEL_DIR");
  }
  IdSource src(tokenizer, spec.vocab_size, spec.seed);
  if (tokenizer != nullptr && !src.has_pool()) {
    return InvalidArgument("the tokenizer has no plain-word tokens to build prompts from");
  }
  PromptSet set;
  const int prefix_len = static_cast<int>(std::llround(spec.shared_prefix_ratio * spec.input_len));
  set.prefix_len = prefix_len;
  const int groups = prefix_len > 0 ? spec.num_prefix_groups : 0;
  for (int g = 0; g < groups; ++g) {
    BenchPrompt p;
    p.ids = src.Draw(prefix_len);
    p.prompt_len = prefix_len;
    p.output_len = 1;
    p.group = g;
    if (spec.text) p.text = tokenizer->Decode(p.ids);
    set.prefixes.push_back(std::move(p));
  }
  const int min_len = std::max(1, static_cast<int>(std::floor(spec.input_len * spec.range_ratio)));
  std::uniform_int_distribution<int> len_dist(min_len, spec.input_len);
  for (int i = 0; i < spec.num_prompts; ++i) {
    BenchPrompt p;
    const int len = spec.range_ratio >= 1.0 ? spec.input_len : len_dist(src.rng());
    const int suffix_len = std::max(1, len - prefix_len);
    p.group = groups > 0 ? i % groups : -1;
    p.output_len = spec.output_len;
    for (int attempt = 0; attempt < 10; ++attempt) {
      p.ids = groups > 0 ? set.prefixes[static_cast<size_t>(p.group)].ids : std::vector<int32_t>{};
      std::vector<int32_t> suffix = src.Draw(suffix_len);
      p.ids.insert(p.ids.end(), suffix.begin(), suffix.end());
      p.prompt_len = static_cast<int>(p.ids.size());
      if (!spec.text) break;
      // Byte-identical prefix text per group: concatenate the group's text and the suffix's.
      p.text = (groups > 0 ? set.prefixes[static_cast<size_t>(p.group)].text : std::string()) +
               tokenizer->Decode(suffix);
      std::vector<int32_t> re = tokenizer->Encode(p.text, /*allow_special=*/false);
      if (re == p.ids) break;
      if (attempt == 9) {
        set.text_len_mismatches++;
        p.ids = std::move(re);
        p.prompt_len = static_cast<int>(p.ids.size());
      }
    }
    set.prompts.push_back(std::move(p));
  }
  return set;
}

}  // namespace mx::loadgen
