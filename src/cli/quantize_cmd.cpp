// `mxserve quantize IN_DIR OUT_DIR --format mxfp4|fp8`: bf16 checkpoint → MXFP4 checkpoint in
// AMD Quark's layout, or → FP8 block-scaled checkpoint in the DeepSeek layout; an FP8 checkpoint
// → MXFP4 (quant/quantizer.h). A progress bar and ETA on a terminal.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cli/verb.h"
#include "quant/quant_format.h"
#include "quant/quantizer.h"

namespace mx::cli {
namespace {

struct QuantizeArgs {
  std::string in_dir, out_dir;
  std::string format = "mxfp4";
  std::string scale_mode = "even";
  std::string max_shard_size = "5GB";
  std::vector<std::string> exclude, include;
  bool overwrite = false;
};

std::string Seconds(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s) / 3600, (int(s) / 60) % 60);
}

int RunQuantize(const QuantizeArgs& a) {
  if (auto f = quant::FindQuantFormat(a.format); !f.ok()) return Fail(f.status().message());
  quant::QuantizeOptions o;
  o.format = a.format;
  auto mode = quant::ParseScaleMode(a.scale_mode);
  if (!mode.ok()) return Fail("--scale-mode: " + mode.status().message());
  o.scale_mode = *mode;
  auto shard = quant::ParseByteSize(a.max_shard_size);
  if (!shard.ok()) return Fail("--max-shard-size: " + shard.status().message());
  o.max_shard_bytes = *shard;
  o.exclude = a.exclude;
  o.include = a.include;
  o.overwrite = a.overwrite;
  o.threads = Globals().threads;
  const bool tty = ::isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  if (tty) {
    o.progress = [t0](const quant::QuantizeProgress& p) {
      const double el =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double f = p.bytes_total ? double(p.bytes_done) / p.bytes_total : 1.0;
      const int width = 30, fill = static_cast<int>(f * width);
      const double eta = f > 0 ? el * (1 - f) / f : 0;
      std::fprintf(stderr, "\r[%s%s] %3.0f%% %lld/%lld tensors, %s elapsed, ETA %s   ",
                   std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(), 100 * f,
                   static_cast<long long>(p.tensors_done), static_cast<long long>(p.tensors_total),
                   Seconds(el).c_str(), Seconds(eta).c_str());
      if (p.tensors_done == p.tensors_total) std::fprintf(stderr, "\n");
    };
  }
  auto r = quant::QuantizeCheckpoint(a.in_dir, a.out_dir, o);
  if (!r.ok()) return Fail(r.status().message());
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "quantized %lld tensor(s) to %s, kept %lld; %.1f MB -> %.1f MB (%.2fx) in "
      "%d file(s), %.1fs (%.0f MB/s); %zu module(s) left unquantized\n",
      static_cast<long long>(r->n_quantized),
      a.format == "mxfp4" ? ("MXFP4 (" + a.scale_mode + " scales)").c_str()
                          : "FP8 (128x128 block scales)",
      static_cast<long long>(r->n_kept), r->in_bytes / 1e6, r->out_bytes / 1e6,
      r->out_bytes ? double(r->in_bytes) / r->out_bytes : 0.0, r->num_shards, el,
      el > 0 ? r->in_bytes / 1e6 / el : 0.0, r->exclude.size());
  return 0;
}

VerbRun Setup(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* sub =
      app.add_subcommand("quantize",
                         "quantize a bf16 checkpoint to MXFP4 (Quark layout) or FP8 (DeepSeek "
                         "128x128 blocks), or an FP8 checkpoint to MXFP4");
  sub->add_option("IN_DIR", a->in_dir, "bf16 (or, for mxfp4, FP8) Hugging Face checkpoint")
      ->required();
  sub->add_option("OUT_DIR", a->out_dir, "output directory (must not exist)")->required();
  sub->add_option("--format", a->format,
                  "output format: mxfp4 (routed experts) or fp8 (every matrix but the embedding, "
                  "lm_head, routers, indexer weights_proj, MTP eh_proj)")
      ->capture_default_str();
  sub->add_option("--scale-mode", a->scale_mode, "E8M0 scale rule: even (Quark) or floor (OCP)")
      ->capture_default_str();
  sub->add_option("--max-shard-size", a->max_shard_size, "shard above this size (5GB, 500MB)")
      ->capture_default_str();
  sub->add_option("--exclude", a->exclude,
                  "keep matching modules in bf16: exact name, glob, or re:REGEX (repeatable)");
  sub->add_option("--include", a->include,
                  "also quantize matching 2-d weights (same syntax; --exclude wins)");
  sub->add_flag("--overwrite", a->overwrite, "replace OUT_DIR if it exists");
  return [a] { return RunQuantize(*a); };
}

}  // namespace

MX_REGISTER_VERB(quantize, "quantize", 30, Setup);

}  // namespace mx::cli
