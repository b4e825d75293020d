// The comparison table: Δ, combined SE and the 2·SE verdict on summaries built by hand, and
// clear errors for summaries that are not comparable or not summaries.
#include "eval/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace mx::eval {
namespace {

using json = nlohmann::json;

json Summary(double acc, double se, int n = 200, const std::string& task = "gsm8k") {
  return {{"task", task},      {"protocol", "5-shot chat, greedy"},
          {"num_examples", n}, {"seeds", 1},
          {"accuracy", acc},   {"stderr", se},
          {"errors", 0}};
}

TEST(Compare, DeltaAndVerdict) {
  // SE(Δ) = sqrt(0.03² + 0.04²) = 0.05; |Δ| = 0.08 <= 0.10: within.
  auto r = Compare(Summary(0.60, 0.03), Summary(0.52, 0.04), "b", "q");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->delta, -0.08, 1e-12);
  EXPECT_NEAR(r->combined_se, 0.05, 1e-12);
  EXPECT_TRUE(r->within);
  // |Δ| = 0.12 > 0.10: outside.
  auto out = Compare(Summary(0.60, 0.03), Summary(0.48, 0.04), "b", "q");
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->within);
  // Exactly on the boundary counts as within.
  auto edge = Compare(Summary(0.50, 0.03), Summary(0.60, 0.04), "b", "q");
  ASSERT_TRUE(edge.ok());
  EXPECT_TRUE(edge->within);
}

TEST(Compare, TableText) {
  auto r = Compare(Summary(0.054, 0.0101), Summary(0.046, 0.0094), "b", "q");
  ASSERT_TRUE(r.ok());
  const std::string t = FormatCompareTable({*r}, "bf16", "MXFP4");
  EXPECT_NE(t.find("| bf16 | MXFP4 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 5.4 ± 1.0 | 4.6 ± 0.9 | -0.8 | 2.8 | yes |"), std::string::npos) << t;
  json j = CompareJson({*r}, "bf16", "MXFP4");
  EXPECT_EQ(j["rows"][0]["within_2se"], true);
  EXPECT_NEAR(j["rows"][0]["combined_stderr"].get<double>(), std::hypot(0.0101, 0.0094), 1e-12);
}

TEST(Compare, RefusesDifferentEvals) {
  auto task = Compare(Summary(0.5, 0.1), Summary(0.5, 0.1, 200, "arith"), "a.json", "b.json");
  ASSERT_FALSE(task.ok());
  EXPECT_NE(task.status().message().find("a.json and b.json differ in \"task\""), std::string::npos)
      << task.status().message();
  auto n = Compare(Summary(0.5, 0.1, 200), Summary(0.5, 0.1, 100), "a.json", "b.json");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("num_examples"), std::string::npos);
}

TEST(Compare, ReadSummaryValidates) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("summary-" + std::to_string(::getpid()) + ".json"))
          .string();
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write(Summary(0.5, 0.1).dump());
  EXPECT_TRUE(ReadSummary(path).ok());
  write("[1]");
  EXPECT_NE(ReadSummary(path).status().message().find("not a JSON object"), std::string::npos);
  json no_se = Summary(0.5, 0.1);
  no_se.erase("stderr");
  write(no_se.dump());
  EXPECT_NE(ReadSummary(path).status().message().find(path + ": \"stderr\" missing"),
            std::string::npos);
  write(Summary(1.5, 0.1).dump());
  EXPECT_NE(ReadSummary(path).status().message().find("outside [0, 1]"), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_NE(ReadSummary(path).status().message().find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace mx::eval
