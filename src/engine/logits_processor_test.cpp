// ApplyPenalties: OpenAI's frequency / presence penalties lower a generated token's logit by
// f·count + p; a negative penalty raises it; tokens never generated keep theirs.
#include "engine/logits_processor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace mx {
namespace {

TEST(LogitsProcessor, FrequencyAndPresencePenaltiesLowerGeneratedTokens) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::uniform_int_distribution<int32_t> count(1, 5);
  constexpr int64_t kVocab = 257;
  std::vector<float> before(kVocab);
  for (float& x : before) x = logit(rng);
  PenaltyState st;
  st.seen.assign(kVocab, 0);
  for (int32_t t = 0; t < kVocab; t += 7) st.output_counts[t] = count(rng);
  for (const float sign : {1.0f, -1.0f}) {
    GenerationRequest req;
    req.frequency_penalty = sign * std::uniform_real_distribution<float>(0.1f, 2.0f)(rng);
    req.presence_penalty = sign * std::uniform_real_distribution<float>(0.1f, 2.0f)(rng);
    std::vector<float> got = before;
    ApplyPenalties(req, st, got);
    for (int32_t t = 0; t < kVocab; ++t) {
      const auto it = st.output_counts.find(t);
      if (it == st.output_counts.end()) {
        EXPECT_EQ(got[t], before[t]) << "token " << t << " was never generated";
        continue;
      }
      const float drop =
          req.frequency_penalty * static_cast<float>(it->second) + req.presence_penalty;
      EXPECT_NEAR(got[t], before[t] - drop, 1e-4f * (1.0f + std::abs(before[t]) + std::abs(drop)))
          << "token " << t << " generated " << it->second << " times";
      if (sign > 0) EXPECT_LT(got[t], before[t]) << "a positive penalty must lower token " << t;
      if (sign < 0) EXPECT_GT(got[t], before[t]) << "a negative penalty must raise token " << t;
    }
  }
}

}  // namespace
}  // namespace mx
