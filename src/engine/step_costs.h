// How long a step takes, learned from the steps that ran, so the batch planner can size
// prefill chunks that keep decoding streams on pace (EngineOptions::max_decode_gap_ms).
//
// Model (docs/performance.md, "Decode under a long prefill", measured on bench-scale): a step
// with d decode rows and prompt tokens costs D(d) + Σ n·m(c), where D(d) is what the decode
// rows alone cost and m(c) the marginal cost of a prompt token at context c (its position:
// attention and the indexer grow with it). The decode rows ride almost free in a step that
// carries a prompt chunk (every weight is read once per forward, whatever the rows: 4 rows
// add ~2–3 ms to a chunk's ~70 ms, and cost ~24 ms alone), so D(d) is also the fixed cost a
// mixed step pays once. D is learned per decode-row bucket (1, 2, 3–4, 5–8, …) from
// decode-only steps, m per context bucket (< 512, then doublings: 512–1k, 1k–2k, …) from
// (t − D(d)) / n over mixed steps and from (t − D(min)) / n over prefill-only steps (D(min):
// the fewest-rows decode estimate, at most the step's fixed cost: an overestimate, on the safe
// side). Each bucket is an exponential average over its last few observations, the first
// seeding it. An unobserved bucket borrows the nearest observed one above it (costs rise with
// rows and context: a safe guess), else the nearest below.
//
// Pure logic: the scheduler times each whole step (plan, forward, sampling: what a stream sees
// between two tokens) and reports it; this never reads a clock.
// Thread-safety: none (the engine loop thread owns it).
#pragma once

#include <array>
#include <cstdint>

namespace mx {

class StepCosts {
 public:
  // The mean position of n prompt tokens starting at `start` (the context a chunk is priced at).
  static double MidContext(int64_t start, int64_t n) {
    return static_cast<double>(start) + static_cast<double>(n - 1) / 2.0;
  }

  // A step that ran `decode_rows` decode rows (requests emitting a token, drafts included) and
  // `prefill_tokens` prompt tokens whose mean position is `prefill_context`, in `seconds`.
  void Observe(int64_t decode_rows, int64_t prefill_tokens, double prefill_context, double seconds);

  // Predicted seconds of a step of `decode_rows` decode rows alone; negative: none observed.
  double DecodeSeconds(int64_t decode_rows) const;
  // Predicted marginal seconds of one prompt token at position `context`; negative: unknown.
  double TokenSeconds(double context) const;
  // Predicted marginal seconds of a chunk of n prompt tokens starting at `start` (0 for n ≤ 0);
  // negative: unknown.
  double ChunkSeconds(int64_t start, int64_t n) const;
  // The most prompt tokens starting at position `start`, at most max_tokens, whose predicted
  // marginal time is within `seconds`; -1 when the token cost is unknown.
  int64_t TokensWithin(double seconds, int64_t start, int64_t max_tokens) const;

  static constexpr int kRowBuckets = 8;       // 1, 2, 3–4, 5–8, …, 65+
  static constexpr int kContextBuckets = 12;  // < 512, 512–1k, 1k–2k, …, ≥ 512k
  static int RowBucket(int64_t decode_rows);
  static int ContextBucket(double context);

 private:
  std::array<double, kRowBuckets> decode_s_ = Unobserved<kRowBuckets>();
  std::array<double, kContextBuckets> token_s_ = Unobserved<kContextBuckets>();

  template <int N>
  static constexpr std::array<double, N> Unobserved() {
    std::array<double, N> a{};
    a.fill(-1.0);
    return a;
  }
};

}  // namespace mx
