// Shared by the in-process and MPI collective tests: deterministic random rank data (so that
// any rank can compute the serial reference of all ranks) and the fp32 tolerance check.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "parallel/communicator.h"

namespace mx::testing {

// Rank `rank`'s buffer of `n` floats for trial `trial`: uniform in [-1, 1), or integers in
// [-1000, 1000] when `integers`.
inline std::vector<float> RankData(uint64_t trial, int rank, size_t n, bool integers) {
  std::mt19937_64 rng(trial * 1000003 + static_cast<uint64_t>(rank) * 7919 + 17);
  std::vector<float> v(n);
  if (integers) {
    std::uniform_int_distribution<int> d(-1000, 1000);
    for (float& x : v) x = static_cast<float>(d(rng));
  } else {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (float& x : v) x = d(rng);
  }
  return v;
}

// memcmp over n floats that accepts n == 0 (and the null data() of empty vectors).
inline bool SameFloats(const float* a, const float* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

// The exact sum (in double) and sum of |x| over ranks, per element.
struct SumReference {
  std::vector<double> sum;
  std::vector<double> abs_sum;
};

inline SumReference ReferenceSum(uint64_t trial, int n_ranks, size_t n, bool integers) {
  SumReference ref{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (int r = 0; r < n_ranks; ++r) {
    std::vector<float> v = RankData(trial, r, n, integers);
    for (size_t i = 0; i < n; ++i) {
      ref.sum[i] += v[i];
      ref.abs_sum[i] += std::fabs(v[i]);
    }
  }
  return ref;
}

// The documented bound (communicator.h): (size - 1) * 2^-24 * sum |x|.
inline double AllReduceBound(int n_ranks, double abs_sum) {
  return (n_ranks - 1) * kAllReduceRelTolerance * abs_sum;
}

// `iterations` back-to-back collectives of random kinds and shapes drawn from `seed` (the same
// sequence on every rank), each checked against its reference: no deadlock, no cross-talk
// between consecutive calls.
inline void RunMixedCollectives(Communicator& c, uint32_t seed, int iterations) {
  const int n = c.size();
  std::mt19937 shapes(seed);
  for (int it = 0; it < iterations; ++it) {
    const int kind = static_cast<int>(shapes() % 4);
    const size_t len = shapes() % 300;
    const int root = static_cast<int>(shapes() % n);
    const uint64_t trial = 1000 + it;
    if (kind == 0) {
      std::vector<float> v = RankData(trial, c.rank(), len, true);
      ASSERT_TRUE(c.AllReduceSum(v).ok());
      const auto ref = ReferenceSum(trial, n, len, true);
      for (size_t i = 0; i < len; ++i) ASSERT_EQ(v[i], ref.sum[i]) << "it " << it;
    } else if (kind == 1) {
      std::vector<float> in = RankData(trial, c.rank(), len, false);
      std::vector<float> out(len * n);
      ASSERT_TRUE(c.AllGather<float>(in, out).ok());
      for (int r = 0; r < n; ++r) {
        const std::vector<float> want = RankData(trial, r, len, false);
        ASSERT_TRUE(SameFloats(out.data() + r * len, want.data(), len))
            << "it " << it << " block " << r;
      }
    } else if (kind == 2) {
      std::vector<float> v = RankData(trial, c.rank(), len, false);
      ASSERT_TRUE(c.Broadcast<float>(v, root).ok());
      const std::vector<float> want = RankData(trial, root, len, false);
      ASSERT_TRUE(SameFloats(v.data(), want.data(), len)) << "it " << it;
    } else {
      ASSERT_TRUE(c.Barrier().ok());
    }
  }
}

}  // namespace mx::testing
