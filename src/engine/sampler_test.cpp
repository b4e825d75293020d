#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace mx {
namespace {

std::vector<float> RandomLogits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Sampler, GreedyIsArgmax) {
  auto l = RandomLogits(1000, 1);
  Sampler s({.temperature = 0});
  EXPECT_EQ(s.Sample(l), Argmax(l));
  EXPECT_EQ(l[Argmax(l)], *std::max_element(l.begin(), l.end()));
}

TEST(Sampler, SameSeedSameTokens) {
  auto l = RandomLogits(500, 2);
  Sampler a({.temperature = 1.0f, .seed = 7}), b({.temperature = 1.0f, .seed = 7}),
      c({.temperature = 1.0f, .seed = 8});
  int diff = 0;
  for (int i = 0; i < 100; ++i) {
    int32_t x = a.Sample(l), y = b.Sample(l), z = c.Sample(l);
    EXPECT_EQ(x, y);
    diff += x != z;
  }
  EXPECT_GT(diff, 0);
}

TEST(Sampler, TopKAndTopPRestrictSupport) {
  auto l = RandomLogits(200, 3);
  std::vector<int32_t> order(200);
  for (int i = 0; i < 200; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  Sampler k({.temperature = 1.5f, .top_k = 5, .seed = 1});
  for (int i = 0; i < 500; ++i) {
    int32_t t = k.Sample(l);
    EXPECT_NE(std::find(order.begin(), order.begin() + 5, t), order.begin() + 5);
  }
  Sampler p({.temperature = 1.0f, .top_p = 1e-6f, .seed = 1});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.Sample(l), order[0]) << "tiny top_p keeps only the best";
}

TEST(Sampler, MatchesSoftmaxDistribution) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f, -1.0f};
  Sampler s({.temperature = 1.0f, .seed = 42});
  std::map<int, int> counts;
  const int N = 40000;
  for (int i = 0; i < N; ++i) counts[s.Sample(l)]++;
  double z = 0;
  for (float x : l) z += std::exp(x);
  double chi2 = 0;
  for (int i = 0; i < 4; ++i) {
    double e = N * std::exp(l[i]) / z;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 16.27) << "chi-square, 3 dof, p = 0.001";
}

}  // namespace
}  // namespace mx
