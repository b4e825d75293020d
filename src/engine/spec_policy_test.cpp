// SpecPolicy: fixed drafts answer the configured count at both points; auto's answers follow
// its chooser (here replaced by a test schedule, clamped to the range) and its stats say so.
#include "engine/spec_policy.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

TEST(SpecPolicy, FixedDraftsEveryStep) {
  SpecPolicy p(3, /*automatic=*/false, {}, nullptr);
  EXPECT_TRUE(p.WantMtpRows());
  for (int64_t decoding : {0, 1, 7}) {
    const SpecPolicy::Drafts d = p.Next(decoding);
    EXPECT_EQ(d.steps, 3);
    EXPECT_EQ(d.drafters, decoding);
    EXPECT_TRUE(d.keep_mtp);
  }
  SpeculativeStats s;
  p.FillStats(&s);
  EXPECT_FALSE(s.automatic);
  EXPECT_EQ(s.steps_chosen, 3);
  SpecPolicy off(0, /*automatic=*/true, {}, nullptr);  // no speculation: no chooser
  EXPECT_FALSE(off.automatic());
  off.FillStats(&s);
  EXPECT_EQ(s.steps_chosen, 0);
}

TEST(SpecPolicy, AutoFollowsItsScheduleClampedAndCountsDecodeSteps) {
  std::vector<int64_t> seen;
  SpecPolicy p(4, /*automatic=*/true, {}, [&](int32_t, int64_t step) {
    seen.push_back(step);
    return static_cast<int32_t>(step) * 3 - 1;  // -1, 2, 5, ...
  });
  EXPECT_TRUE(p.automatic());
  EXPECT_TRUE(p.WantMtpRows());   // a test schedule keeps the MTP layer up
  EXPECT_EQ(p.Next(2).steps, 0);  // clamped up
  EXPECT_EQ(p.Next(0).steps, 0);  // nothing decodes: no step counted
  EXPECT_EQ(p.Next(2).steps, 2);
  const SpecPolicy::Drafts d = p.Next(2);
  EXPECT_EQ(d.steps, 4);  // clamped down
  EXPECT_EQ(d.drafters, 2);
  EXPECT_TRUE(d.keep_mtp);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
  SpeculativeStats s;
  p.FillStats(&s);
  EXPECT_TRUE(s.automatic);
}

}  // namespace
}  // namespace mx
