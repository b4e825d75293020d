// `mxserve bench offline MODEL_DIR [-p N,...] [-n N,...] [-gp P,G] [-t T] [-r R] [-o md|json]`:
// llama-bench for mxserve (engine/offline_bench.h has the tests' meaning). Flags and JSON field
// names are llama-bench's, so ../shared/anchors/side_by_side.py runs both engines alike; the
// table or the JSON array goes to stdout, progress to stderr.
#include "cli/bench_offline.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "engine/engine.h"
#include "engine/model_factory.h"
#include "engine/offline_bench.h"
#include "model/tensor_plan.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;

struct OfflineArgs {
  std::string model_dir;
  std::vector<std::string> n_prompt = {"512"};  // llama-bench's defaults
  std::vector<std::string> n_gen = {"128"};
  std::vector<std::string> prompt_gen;  // "P,G" each
  int threads = -1;                     // -1: not given (--threads, else one per core)
  int repetitions = 5;
  std::string output = "md";
  std::optional<KernelLevel> kernels;                         // nullopt: this CPU's best
  GemmActivations gemm_activations = GemmActivations::kBf16;  // serve's default
  std::string kv_cache_dtype = "auto";
  std::string tuned_config_dir;
  int64_t chunked_prefill_size = EngineOptions{}.chunked_prefill_size;
  uint64_t seed = 1;
};

// "512,1024" (and repeated flags) -> sizes. Errors name the flag and the bad item.
Result<std::vector<int64_t>> ParseSizes(const std::vector<std::string>& items,
                                        const std::string& flag) {
  std::vector<int64_t> out;
  for (const std::string& item : items) {
    size_t pos = 0;
    while (pos <= item.size()) {
      size_t end = item.find(',', pos);
      if (end == std::string::npos) end = item.size();
      const std::string s = item.substr(pos, end - pos);
      char* e = nullptr;
      const long long v = std::strtoll(s.c_str(), &e, 10);
      if (s.empty() || *e != '\0' || v < 0) {
        return InvalidArgument("{} '{}': expected non-negative integers separated by commas", flag,
                               item);
      }
      out.push_back(v);
      pos = end + 1;
    }
  }
  return out;
}

Result<std::vector<std::pair<int64_t, int64_t>>> ParsePairs(const std::vector<std::string>& items) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const std::string& item : items) {
    MX_ASSIGN_OR_RETURN(std::vector<int64_t> v, ParseSizes({item}, "-gp"));
    if (v.size() != 2) return InvalidArgument("-gp '{}': expected P,G (prompt, generated)", item);
    out.emplace_back(v[0], v[1]);
  }
  return out;
}

// Bytes of the checkpoint's .safetensors files (llama-bench's model_size).
int64_t CheckpointBytes(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    if (f.path().extension() == ".safetensors") bytes += static_cast<int64_t>(f.file_size(ec));
  }
  return bytes;
}

// What every row shares: the model, the machine set-up.
struct RunInfo {
  std::string model_filename, model_type, kernels, gemm_activations, kv_cache_dtype, test_time;
  int64_t model_size = 0, model_n_params = 0, n_batch = 0;
  int n_threads = 0;
};

nlohmann::ordered_json JsonRow(const RunInfo& info, const BenchSamples& s) {
  nlohmann::ordered_json j;
  j["mxserve_version"] = MX_VERSION;
  j["model_filename"] = info.model_filename;
  j["model_type"] = info.model_type;
  j["model_size"] = info.model_size;
  j["model_n_params"] = info.model_n_params;
  j["kernels"] = info.kernels;
  j["gemm_activations"] = info.gemm_activations;
  j["kv_cache_dtype"] = info.kv_cache_dtype;
  j["n_batch"] = info.n_batch;
  j["n_threads"] = info.n_threads;
  j["test"] = s.test.Name();
  j["n_prompt"] = s.test.n_prompt;
  j["n_gen"] = s.test.n_gen;
  j["test_time"] = info.test_time;
  std::vector<int64_t> ns;
  for (double sec : s.seconds) ns.push_back(static_cast<int64_t>(sec * 1e9));
  const auto [avg_s, sd_s] = MeanAndStddev(s.seconds);
  j["avg_ns"] = static_cast<int64_t>(avg_s * 1e9);
  j["stddev_ns"] = static_cast<int64_t>(sd_s * 1e9);
  j["avg_ts"] = s.avg_tps;
  j["stddev_ts"] = s.stddev_tps;
  j["samples_ns"] = ns;
  j["samples_ts"] = s.tokens_per_second;
  return j;
}

std::string MarkdownTable(const RunInfo& info, const std::vector<BenchSamples>& rows) {
  std::string out =
      "| model | size | params | kernels | kv cache | threads | test | t/s |\n"
      "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |\n";
  for (const BenchSamples& s : rows) {
    const double gib = static_cast<double>(info.model_size) / (1 << 30);
    const std::string size =
        gib >= 1 ? fmt::format("{:.2f} GiB", gib) : fmt::format("{:.2f} MiB", gib * 1024);
    out += fmt::format("| {} | {} | {:.2f} M | {} | {} | {} | {} | {:.2f} ± {:.2f} |\n",
                       info.model_type, size, static_cast<double>(info.model_n_params) / 1e6,
                       info.kernels, info.kv_cache_dtype, info.n_threads, s.test.Name(), s.avg_tps,
                       s.stddev_tps);
  }
  return out;
}

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "mxserve bench offline: %s\n", message.c_str());
  return 2;
}

int RunOffline(const OfflineArgs& a) {
  // Usage errors first, before minutes of loading.
  if (a.output != "md" && a.output != "json") {
    return Usage(fmt::format("-o '{}': expected md or json", a.output));
  }
  if (a.repetitions < 1) return Usage(fmt::format("-r {}: must be >= 1", a.repetitions));
  if (a.chunked_prefill_size < 1) {
    return Usage(fmt::format("--chunked-prefill-size {}: must be >= 1", a.chunked_prefill_size));
  }
  auto p = ParseSizes(a.n_prompt, "-p");
  if (!p.ok()) return Usage(p.status().message());
  auto n = ParseSizes(a.n_gen, "-n");
  if (!n.ok()) return Usage(n.status().message());
  auto pg = ParsePairs(a.prompt_gen);
  if (!pg.ok()) return Usage(pg.status().message());
  auto tests = MakeBenchTests(*p, *n, *pg);
  if (!tests.ok()) return Usage(tests.status().message());
  if (tests->empty()) return Usage("no test to run (-p, -n and -gp are all 0 or empty)");
  auto kv_dtype = ParseKvCacheDtype(a.kv_cache_dtype);
  if (!kv_dtype.ok()) return Usage("--kv-cache-dtype: " + kv_dtype.status().message());

  std::fprintf(stderr, "mxserve bench offline: loading %s ...\n", a.model_dir.c_str());
  ModelLoadOptions lo;
  lo.model_dir = a.model_dir;
  lo.kernels = a.kernels;
  lo.gemm_activations = a.gemm_activations;
  lo.tuned_config_dir = a.tuned_config_dir;
  lo.tokenizer = TokenizerLoad::kNone;
  auto loaded = LoadModel(lo);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const ModelConfig config = loaded->model->config();
  int64_t max_positions = 0;
  for (const BenchTest& t : *tests) {
    if (t.positions() > config.max_position_embeddings) {
      return Fail(fmt::format("test {} needs {} positions but the context window is {}", t.Name(),
                              t.positions(), config.max_position_embeddings));
    }
    max_positions = std::max(max_positions, t.positions());
  }
  RunInfo info;
  info.model_filename = a.model_dir;
  info.model_type = fmt::format("{} {}", config.model_type, ArchitectureName(config.architecture));
  info.model_size = CheckpointBytes(a.model_dir);
  info.model_n_params = Summarize(config, ExpectedTensors(config)).total_params;
  info.kernels = KernelLevelName(loaded->kernels->level);
  info.gemm_activations = GemmActivationsName(loaded->kernels->bf16_activations);
  info.kv_cache_dtype = KvCacheDtypeName(*kv_dtype);
  info.n_batch = a.chunked_prefill_size;
  info.test_time = NowUtc();
  const std::string moe = loaded->moe.state();
  // Enough random ids that every routed expert is picked (weights resident): 8·E/top-k, >= 64.
  const int64_t warm = std::min<int64_t>(
      config.max_position_embeddings,
      std::max<int64_t>(64, config.num_experts_per_tok > 0
                                ? 8 * config.n_routed_experts / config.num_experts_per_tok
                                : 0));
  auto kv = MakeSingleSequenceKvStore(config, *kv_dtype, std::max(max_positions, warm),
                                      EngineOptions{}.page_size, loaded->model->kv_scales());
  const int threads = a.threads >= 0 ? a.threads : Globals().threads;
  auto runner = MakeModelRunner(*loaded, threads);
  if (!runner.ok()) return Fail(runner.status().message());
  info.n_threads = (*runner)->threads();
  std::fprintf(stderr,
               "mxserve bench offline: kernels %s, %d threads, KV cache %s, MoE config %s, "
               "prefill chunks of %lld tokens, %d runs per test after a warm-up; weights warmed "
               "with a %lld-token prefill\n",
               info.kernels.c_str(), info.n_threads, info.kv_cache_dtype.c_str(), moe.c_str(),
               static_cast<long long>(a.chunked_prefill_size), a.repetitions,
               static_cast<long long>(warm));

  if (Status st = WarmUpWeights(**runner, *kv, warm, a.chunked_prefill_size, a.seed); !st.ok()) {
    return Fail(st.message());
  }
  BenchOptions bo;
  bo.chunk = a.chunked_prefill_size;
  bo.repetitions = a.repetitions;
  bo.seed = a.seed;
  std::vector<BenchSamples> rows;
  for (const BenchTest& t : *tests) {
    auto s = RunBenchTest(**runner, *kv, t, bo, [](const std::string& line) {
      std::fprintf(stderr, "  %s\n", line.c_str());
    });
    if (!s.ok()) return Fail(s.status().message());
    std::fprintf(stderr, "%s: %.2f ± %.2f tok/s\n", t.Name().c_str(), s->avg_tps, s->stddev_tps);
    rows.push_back(std::move(*s));
  }
  if (a.output == "json") {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const BenchSamples& s : rows) arr.push_back(JsonRow(info, s));
    std::printf("%s\n", arr.dump(2).c_str());
  } else {
    std::printf("%s", MarkdownTable(info, rows).c_str());
  }
  return 0;
}

}  // namespace

VerbRun SetupBenchOffline(CLI::App& bench) {
  auto a = std::make_shared<OfflineArgs>();
  auto* sub = bench.add_subcommand(
      "offline", "llama-bench for mxserve: ppN, tgN, tgG@ppP tok/s with the model resident");
  sub->add_option("model_dir", a->model_dir, "Hugging Face checkpoint directory")->required();
  sub->add_option("-p,--n-prompt", a->n_prompt, "prompt sizes, comma-separated (0: none)")
      ->allow_extra_args(false)
      ->capture_default_str();
  sub->add_option("-n,--n-gen", a->n_gen, "generation lengths, comma-separated (0: none)")
      ->allow_extra_args(false)
      ->capture_default_str();
  sub->add_option("--gp,--n-gen-after-prompt", a->prompt_gen,
                  "P,G: G decode steps after a P-token prompt (llama-bench -gp; repeatable)")
      ->allow_extra_args(false);
  sub->add_option("-t", a->threads, "threads (default: --threads, else one per core)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("-r,--repetitions", a->repetitions, "timed runs per test")->capture_default_str();
  sub->add_option("-o,--output", a->output, "md | json (stdout; progress goes to stderr)")
      ->capture_default_str();
  AddKernelFlags(sub, &a->kernels, &a->gemm_activations);
  sub->add_option("--kv-cache-dtype", a->kv_cache_dtype,
                  "auto (= bf16, as serve) | bf16 | fp8_e4m3 | fp8_e4m3fnuz | f32")
      ->capture_default_str();
  sub->add_option("--tuned-config-dir", a->tuned_config_dir,
                  "tuned MoE kernel configs, searched after the shipped configs/moe/");
  sub->add_option("--chunked-prefill-size", a->chunked_prefill_size,
                  "prefill tokens per forward (serve's default)")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "seed of the random token ids")->capture_default_str();
  return [a]() -> int { return RunOffline(*a); };
}

std::vector<std::string> RewriteLlamaBenchFlags(std::vector<std::string> args) {
  bool offline = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0 && args[i - 1] == "bench" && args[i] == "offline") offline = true;
    if (offline && args[i] == "-gp") args[i] = "--gp";
  }
  return args;
}

}  // namespace mx::cli
