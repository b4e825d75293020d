// llama-bench's tests over a ModelRunner, with the model resident: `mxserve bench offline`
// runs them and bench/model_bench shares the prefill and the random ids.
//
//   ppN       prefill of N random token ids in one sequence, in the engine's prefill chunks
//             (EngineOptions::chunked_prefill_size tokens per forward, as the scheduler runs a
//             lone request); timed; tokens/s = N / seconds.
//   tgN       N single-token decode steps from an empty context (positions 0 .. N-1); timed;
//             tokens/s = N / seconds.
//   tgG@ppP   a P-token prefill (not timed), then G decode steps (timed); tokens/s = G / seconds.
//
// After WarmUpWeights (once, at load), each test starts with one unmeasured warm-up
// (llama-bench's: a prefill of up to one chunk and one decode step), then `repetitions` timed
// runs, each from position 0 of the same
// sequence (its rows are overwritten, so the KV pages stay faulted in as in a running engine).
//
// Thread-safety: none; one test at a time on one runner and store.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/function_ref.h"
#include "base/status.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "kv/paged_kv_store.h"
#include "model/forward_batch.h"

namespace mx {

struct BenchTest {
  int64_t n_prompt = 0;  // tokens prefilled first: timed when n_gen == 0, else not
  int64_t n_gen = 0;     // single-token decode steps after them, timed

  std::string Name() const;  // "pp512", "tg128", "tg32@pp4096"
  // The tokens a timed run counts: n_gen, or n_prompt for a prefill test.
  int64_t timed_tokens() const { return n_gen > 0 ? n_gen : n_prompt; }
  int64_t positions() const { return n_prompt + n_gen; }
  bool operator==(const BenchTest&) const = default;
};

// llama-bench's test list: each prompt size as ppN (n_gen 0), each generation length as tgN
// (n_prompt 0), then each (P, G) pair as tgG@ppP; zeros are skipped (so `-p 0 -n 128` runs
// tg128 alone). Errors: InvalidArgument for a negative size, naming `-p`, `-n` or `-gp`.
Result<std::vector<BenchTest>> MakeBenchTests(
    const std::vector<int64_t>& n_prompt, const std::vector<int64_t>& n_gen,
    const std::vector<std::pair<int64_t, int64_t>>& prompt_gen);

// `n` ids uniform in [0, vocab).
std::vector<int32_t> RandomTokenIds(int64_t n, int64_t vocab, std::mt19937_64& rng);

// One forward over a batch (a ModelRunner's, or a Model's with the caller's options).
using ForwardStep = FunctionRef<Status(const ForwardBatch&)>;

// Prefills `ids` into sequence `seq` at positions [start, start + ids.size()) with one forward
// per chunk of at most `chunk` tokens, in order: the scheduler's chunked prefill of a request
// that has the step to itself. REQUIRES: chunk >= 1.
Status PrefillChunked(ForwardStep step, int64_t seq, int64_t start, std::span<const int32_t> ids,
                      int64_t chunk);

// A paged store (engine/scheduler's row format) holding sequence 0 for `positions` tokens,
// its page table the pages 0, 1, ... in order. `layer_scales`: as PagedKvStore's.
std::unique_ptr<PagedKvStore> MakeSingleSequenceKvStore(const ModelConfig& config,
                                                        KvCacheDtype dtype, int64_t positions,
                                                        int64_t page_size = 64,
                                                        std::vector<float> layer_scales = {});

struct BenchOptions {
  int64_t chunk = 512;  // prefill tokens per forward (the engine's chunked_prefill_size)
  int repetitions = 5;
  uint64_t seed = 1;  // the random ids
};

struct BenchSamples {
  BenchTest test;
  std::vector<double> seconds;  // per timed run: its timed part
  std::vector<double> tokens_per_second;
  double avg_tps = 0;
  double stddev_tps = 0;  // sample standard deviation (n - 1); 0 for one run
};

// The warm-up and `repetitions` timed runs of `test` on sequence 0 of `kv`, through
// runner.Forward. `progress` (may be empty) gets a line per run for stderr. Errors: those of
// the forwards; InvalidArgument for repetitions < 1, chunk < 1 or a test with no tokens.
// REQUIRES: kv holds sequence 0 for test.positions() tokens (MakeSingleSequenceKvStore).
Result<BenchSamples> RunBenchTest(ModelRunner& runner, KvStore& kv, const BenchTest& test,
                                  const BenchOptions& options,
                                  const std::function<void(const std::string&)>& progress = {});

// Makes the weights resident before any test: one untimed prefill of `tokens` random ids on
// sequence 0 (chunks of `chunk`). Enough ids pick every routed expert with near certainty
// (32 experts top-8: 64 tokens miss one with p ~ 1e-7; 256 experts top-8 need ~256), so mmapped
// weights are paged in and a tgN test's first run does not fault in the experts its warm-up
// step did not pick. REQUIRES: kv holds sequence 0 for `tokens` positions.
Status WarmUpWeights(ModelRunner& runner, KvStore& kv, int64_t tokens, int64_t chunk,
                     uint64_t seed = 1);

// Mean and sample standard deviation (n - 1; 0 for fewer than two values).
std::pair<double, double> MeanAndStddev(const std::vector<double>& v);

}  // namespace mx
