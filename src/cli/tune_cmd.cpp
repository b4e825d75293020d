// `mxserve tune moe (--model DIR | --shape model_dim=...,moe_inter=...,E=...,topk=...)
// --dtype mxfp4|fp8|bf16 --tokens 1,2,4,...`: times every valid MoE kernel config per token bucket
// on synthetic data (src/tune/moe_tuner.h), prints tuned vs default per bucket, and writes
// <output-dir>/<dtype>-<shape>-<isa>.json, which `serve` picks up (tune/moe_tuning.h).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "base/thread_pool.h"
#include "cli/cli_util.h"
#include "cli/verb.h"
#include "io/model_config.h"
#include "tune/moe_tuner.h"
#include "tune/moe_tuning.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;

struct TuneArgs {
  std::string model_dir;
  std::string shape;
  std::string dtype;
  std::string tokens = "1,2,4,8,16,32,64,128,256,512";
  std::string output_dir = "configs/moe";
  std::optional<KernelLevel> kernels;  // nullopt: this CPU's best
  GemmActivations gemm_activations = GemmActivations::kBf16;
  int warmup = 1;
  int repeats = 5;
  double max_expert_gib = 2.0;
  int64_t check_rows = 4;
  uint64_t seed = 1;
  bool warm_caches = false;
};

std::string Duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s) / 3600, (int(s) / 60) % 60);
}

Result<std::vector<int64_t>> ParseTokens(const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1) {
      return InvalidArgument("--tokens '{}': '{}' is not a positive integer", text, item);
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

int RunTuneMoe(const TuneArgs& a) {
  if (a.model_dir.empty() == a.shape.empty()) {
    std::fprintf(stderr, "mxserve tune moe: give exactly one of --model DIR or --shape ...\n");
    return 2;
  }
  tune::MoeTuneOptions o;
  if (!a.model_dir.empty()) {
    auto c = LoadModelConfig((fs::path(a.model_dir) / "config.json").string());
    if (!c.ok()) return Fail(c.status().message());
    if (c->n_routed_experts == 0)
      return Fail(fmt::format("{}: the model has no MoE layers", a.model_dir));
    o.shape = MoeShapeOf(*c);
  } else {
    auto s = ParseMoeShape(a.shape);
    if (!s.ok()) return Fail(s.status().message());
    o.shape = *s;
  }
  o.dtype = a.dtype;
  auto tokens = ParseTokens(a.tokens);
  if (!tokens.ok()) return Fail(tokens.status().message());
  o.tokens = *tokens;
  o.warmup = a.warmup;
  o.repeats = a.repeats;
  o.max_expert_bytes = static_cast<int64_t>(a.max_expert_gib * double(int64_t{1} << 30));
  o.check_rows = a.check_rows;
  o.seed = a.seed;
  o.flush_caches = !a.warm_caches;
  o.command = CommandLine();
  auto kt = ResolveKernels(a.kernels, a.gemm_activations);
  if (!kt.ok()) return Fail(kt.status().message());
  ThreadPool pool(Globals().threads);
  const std::string file = MoeTuneFileName(o.dtype, o.shape, KernelLevelName((*kt)->level));
  std::fprintf(stderr, "mxserve tune moe: %s %s on %s, %d thread(s), buckets %s -> %s\n",
               o.dtype.c_str(), MoeShapeSpec(o.shape).c_str(), KernelLevelName((*kt)->level),
               pool.size(), a.tokens.c_str(), (fs::path(a.output_dir) / file).c_str());
  const bool tty = ::isatty(STDERR_FILENO);
  auto progress = [tty](const tune::MoeTuneProgress& p) {
    const double eta =
        p.fraction_done > 0 ? p.elapsed_s * (1 - p.fraction_done) / p.fraction_done : 0;
    std::fprintf(
        stderr,
        "%s[%3.0f%%] tokens %lld, candidate %lld/%lld %-40s %10.1f us  elapsed %s, ETA %s%s",
        tty ? "\r" : "", 100 * p.fraction_done, static_cast<long long>(p.tokens),
        static_cast<long long>(p.candidate), static_cast<long long>(p.candidates), p.config.c_str(),
        p.median_us, Duration(p.elapsed_s).c_str(), Duration(eta).c_str(), tty ? "   " : "\n");
  };
  auto table = tune::TuneMoe(o, **kt, pool, progress);
  if (tty) std::fprintf(stderr, "\n");
  if (!table.ok()) return Fail(table.status().message());
  if (table->experts_allocated < o.shape.n_experts) {
    std::printf(
        "representative subset: %lld of %lld experts allocated (routed expert e runs on "
        "physical expert e mod %lld)\n",
        static_cast<long long>(table->experts_allocated), static_cast<long long>(o.shape.n_experts),
        static_cast<long long>(table->experts_allocated));
  }
  std::printf("| tokens | candidates | default (us) | tuned (us) | speedup | tuned config |\n");
  std::printf("|---:|---:|---:|---:|---:|---|\n");
  for (const MoeTuneBucket& b : table->buckets) {
    std::printf("| %lld | %lld | %.1f | %.1f | %.2fx | %s |\n", static_cast<long long>(b.tokens),
                static_cast<long long>(b.candidates), b.default_us, b.best_us,
                b.default_us / b.best_us, MoeConfigString(b.best).c_str());
  }
  std::error_code ec;
  fs::create_directories(a.output_dir, ec);
  if (ec) return Fail(fmt::format("{}: cannot create: {}", a.output_dir, ec.message()));
  const std::string path = (fs::path(a.output_dir) / file).string();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << SerializeMoeTuneTable(*table);
    if (!out) return Fail(fmt::format("{}: cannot write", tmp));
  }
  fs::rename(tmp, path, ec);
  if (ec) return Fail(fmt::format("{}: cannot rename to {}: {}", tmp, path, ec.message()));
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

VerbRun SetupTune(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  auto* tune = app.add_subcommand("tune", "Tune kernel configs for this machine");
  tune->require_subcommand(1);
  auto* moe = tune->add_subcommand(
      "moe", "Time every MoE kernel config per token bucket and write the tuned config");
  moe->add_option("--model", a->model_dir, "take the MoE shape from DIR/config.json");
  moe->add_option("--shape", a->shape,
                  "model_dim=6144,moe_inter=2048,E=256,topk=8[,shared=1] (instead of --model)");
  moe->add_option("--dtype", a->dtype, "expert weight format")
      ->required()
      ->check(CLI::IsMember({"mxfp4", "fp8", "bf16"}));
  moe->add_option("--tokens", a->tokens, "tokens-per-step buckets, ascending")
      ->capture_default_str();
  moe->add_option("--output-dir", a->output_dir, "where <dtype>-<shape>-<isa>.json is written")
      ->capture_default_str();
  AddKernelFlags(moe, &a->kernels, &a->gemm_activations);
  moe->add_option("--warmup", a->warmup, "untimed runs per candidate after the check run")
      ->capture_default_str();
  moe->add_option("--repeats", a->repeats, "timed runs per candidate (the median is kept)")
      ->capture_default_str();
  moe->add_option("--max-expert-gib", a->max_expert_gib,
                  "weights to allocate; beyond it a representative subset of experts is timed")
      ->capture_default_str();
  moe->add_option("--check-rows", a->check_rows, "tokens checked against the scalar reference")
      ->capture_default_str();
  moe->add_option("--seed", a->seed)->capture_default_str();
  moe->add_flag("--warm-caches", a->warm_caches,
                "time candidates with their experts left in the caches by the previous run "
                "(default: the caches are flushed first, as in a forward step)");
  return [a]() -> int { return RunTuneMoe(*a); };
}

MX_REGISTER_VERB(tune, "tune", 45, SetupTune);

}  // namespace
}  // namespace mx::cli
