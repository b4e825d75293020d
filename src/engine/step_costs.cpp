// StepCosts: running averages of a decode step per row bucket and of a prompt token's
// marginal cost per context bucket.
#include "engine/step_costs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>

namespace mx {

namespace {
// Weight of a new observation: a bucket follows its last few steps (a step's time jitters by a
// few ms; the cost within a context bucket rises as a prompt's context does).
constexpr double kWeight = 0.3;
constexpr double kFirstContextBucket = 512.0;  // tokens below it share bucket 0

void Update(double& avg, double x) { avg = avg < 0.0 ? x : avg + kWeight * (x - avg); }

// Bucket b's value, or the nearest observed above it, else the nearest below; -1 if none.
double Lookup(std::span<const double> buckets, int b) {
  for (size_t i = static_cast<size_t>(b); i < buckets.size(); ++i) {
    if (buckets[i] >= 0.0) return buckets[i];
  }
  for (int i = b - 1; i >= 0; --i) {
    if (buckets[static_cast<size_t>(i)] >= 0.0) return buckets[static_cast<size_t>(i)];
  }
  return -1.0;
}
}  // namespace

int StepCosts::RowBucket(int64_t decode_rows) {
  if (decode_rows <= 1) return 0;
  const int b = std::bit_width(static_cast<uint64_t>(decode_rows - 1));  // 2→1, 3–4→2, 5–8→3
  return std::min(b, kRowBuckets - 1);
}

int StepCosts::ContextBucket(double context) {
  if (!(context >= kFirstContextBucket)) return 0;  // NaN included
  const double b = std::floor(std::log2(context / kFirstContextBucket)) + 1.0;
  return static_cast<int>(std::min(b, static_cast<double>(kContextBuckets - 1)));
}

void StepCosts::Observe(int64_t decode_rows, int64_t prefill_tokens, double prefill_context,
                        double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds)) return;
  if (prefill_tokens <= 0) {
    if (decode_rows > 0) Update(decode_s_[static_cast<size_t>(RowBucket(decode_rows))], seconds);
    return;
  }
  double fixed = 0.0;  // the step's cost besides its prompt tokens
  if (decode_rows > 0) {
    fixed = DecodeSeconds(decode_rows);
    if (fixed < 0.0) return;  // its decode share is unknown: teaches nothing
  } else {
    fixed = std::max(0.0, DecodeSeconds(1));  // the fewest-rows estimate (or none: 0)
  }
  const double per_token = std::max(0.0, seconds - fixed) / static_cast<double>(prefill_tokens);
  Update(token_s_[static_cast<size_t>(ContextBucket(prefill_context))], per_token);
}

double StepCosts::DecodeSeconds(int64_t decode_rows) const {
  return Lookup(decode_s_, RowBucket(decode_rows));
}

double StepCosts::TokenSeconds(double context) const {
  return Lookup(token_s_, ContextBucket(context));
}

double StepCosts::ChunkSeconds(int64_t start, int64_t n) const {
  if (n <= 0) return 0.0;
  const double m = TokenSeconds(MidContext(start, n));
  return m < 0.0 ? -1.0 : m * static_cast<double>(n);
}

int64_t StepCosts::TokensWithin(double seconds, int64_t start, int64_t max_tokens) const {
  if (max_tokens <= 0) return 0;
  if (TokenSeconds(static_cast<double>(start)) < 0.0) return -1;
  if (!(seconds > 0.0)) return 0;
  // The largest n whose chunk fits: the cost of n tokens rises with n (more tokens, each at a
  // later context), so a binary search.
  int64_t lo = 0;
  int64_t hi = max_tokens;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (ChunkSeconds(start, mid) <= seconds) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace mx
