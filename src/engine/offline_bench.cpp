// llama-bench's pp / tg / tg@pp tests over a ModelRunner.
#include "engine/offline_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "base/check.h"

namespace mx {

namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// `n` single-token decode steps of sequence 0 from position `start`, each on a random id.
Status Decode(ForwardStep step, int64_t start, int64_t n, int64_t vocab, std::mt19937_64& rng) {
  for (int64_t i = 0; i < n; ++i) {
    ForwardBatch b;
    b.seqs.push_back({0, start + i, RandomTokenIds(1, vocab, rng), {}});
    MX_RETURN_IF_ERROR(step(b));
  }
  return Status::Ok();
}

}  // namespace

std::string BenchTest::Name() const {
  if (n_gen == 0) return fmt::format("pp{}", n_prompt);
  if (n_prompt == 0) return fmt::format("tg{}", n_gen);
  return fmt::format("tg{}@pp{}", n_gen, n_prompt);
}

Result<std::vector<BenchTest>> MakeBenchTests(
    const std::vector<int64_t>& n_prompt, const std::vector<int64_t>& n_gen,
    const std::vector<std::pair<int64_t, int64_t>>& prompt_gen) {
  std::vector<BenchTest> out;
  for (int64_t p : n_prompt) {
    if (p < 0) return InvalidArgument("-p {}: prompt sizes must be >= 0", p);
    if (p > 0) out.push_back({p, 0});
  }
  for (int64_t g : n_gen) {
    if (g < 0) return InvalidArgument("-n {}: generation lengths must be >= 0", g);
    if (g > 0) out.push_back({0, g});
  }
  for (const auto& [p, g] : prompt_gen) {
    if (p < 0 || g < 0) return InvalidArgument("-gp {},{}: sizes must be >= 0", p, g);
    if (p > 0 || g > 0) out.push_back({p, g});
  }
  return out;
}

std::vector<int32_t> RandomTokenIds(int64_t n, int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

Status PrefillChunked(ForwardStep step, int64_t seq, int64_t start, std::span<const int32_t> ids,
                      int64_t chunk) {
  MX_CHECK_GE(chunk, 1);
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t m = std::min(chunk, n - at);
    ForwardBatch b;
    b.seqs.push_back({seq, start + at, {ids.begin() + at, ids.begin() + at + m}, {}});
    MX_RETURN_IF_ERROR(step(b));
  }
  return Status::Ok();
}

std::unique_ptr<PagedKvStore> MakeSingleSequenceKvStore(const ModelConfig& config,
                                                        KvCacheDtype dtype, int64_t positions,
                                                        int64_t page_size,
                                                        std::vector<float> layer_scales) {
  MX_CHECK_GE(page_size, 1);
  const int64_t n_pages = std::max<int64_t>(1, (positions + page_size - 1) / page_size);
  auto store =
      std::make_unique<PagedKvStore>(config, page_size, n_pages, dtype, std::move(layer_scales));
  std::vector<int32_t>& table = store->PageTable(0);
  table.resize(static_cast<size_t>(n_pages));
  std::iota(table.begin(), table.end(), 0);
  return store;
}

std::pair<double, double> MeanAndStddev(const std::vector<double>& v) {
  if (v.empty()) return {0.0, 0.0};
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  if (v.size() < 2) return {mean, 0.0};
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, std::sqrt(ss / (n - 1))};
}

Status WarmUpWeights(ModelRunner& runner, KvStore& kv, int64_t tokens, int64_t chunk,
                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto ids = RandomTokenIds(tokens, runner.config().vocab_size, rng);
  auto step = [&](const ForwardBatch& b) -> Status { return runner.Forward(b, kv).status(); };
  return PrefillChunked(step, 0, 0, ids, chunk).WithContext("warm-up");
}

Result<BenchSamples> RunBenchTest(ModelRunner& runner, KvStore& kv, const BenchTest& test,
                                  const BenchOptions& o,
                                  const std::function<void(const std::string&)>& progress) {
  if (o.repetitions < 1) return InvalidArgument("-r {}: repetitions must be >= 1", o.repetitions);
  if (o.chunk < 1) return InvalidArgument("prefill chunk {} must be >= 1", o.chunk);
  if (test.timed_tokens() < 1) return InvalidArgument("test {} has no tokens", test.Name());
  const int64_t vocab = runner.config().vocab_size;
  std::mt19937_64 rng(o.seed);
  auto step = [&](const ForwardBatch& b) -> Status { return runner.Forward(b, kv).status(); };
  const std::string name = test.Name();

  // Warm-up: up to one chunk of prefill and one decode step, not measured.
  if (test.n_prompt > 0) {
    const auto ids = RandomTokenIds(std::min(test.n_prompt, o.chunk), vocab, rng);
    MX_RETURN_IF_ERROR(PrefillChunked(step, 0, 0, ids, o.chunk).WithContext(name + " warm-up"));
  }
  if (test.n_gen > 0) {
    MX_RETURN_IF_ERROR(Decode(step, 0, 1, vocab, rng).WithContext(name + " warm-up"));
  }

  BenchSamples s;
  s.test = test;
  for (int r = 0; r < o.repetitions; ++r) {
    const auto prompt = RandomTokenIds(test.n_prompt, vocab, rng);
    auto t0 = std::chrono::steady_clock::now();
    MX_RETURN_IF_ERROR(PrefillChunked(step, 0, 0, prompt, o.chunk).WithContext(name));
    if (test.n_gen > 0) {
      t0 = std::chrono::steady_clock::now();  // the prompt of tg@pp is not timed
      MX_RETURN_IF_ERROR(Decode(step, test.n_prompt, test.n_gen, vocab, rng).WithContext(name));
    }
    const double sec = Seconds(t0, std::chrono::steady_clock::now());
    s.seconds.push_back(sec);
    s.tokens_per_second.push_back(static_cast<double>(test.timed_tokens()) / sec);
    if (progress) {
      progress(fmt::format("{} run {}/{}: {:.2f} ms, {:.2f} tok/s", name, r + 1, o.repetitions,
                           sec * 1e3, s.tokens_per_second.back()));
    }
  }
  std::tie(s.avg_tps, s.stddev_tps) = MeanAndStddev(s.tokens_per_second);
  return s;
}

}  // namespace mx
