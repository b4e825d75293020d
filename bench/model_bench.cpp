// Forward-pass benchmark on the bench-scale configuration (../shared/configs/bench-scale.json:
// GlmMoeDsa, hidden 2048, 8 layers, 32 routed experts top-8, moe_intermediate 768, vocab 32000,
// dense indexer below index_topk 2048): measures this machine's read bandwidth and the
// kernels' bf16 GEMM rate, generates a random bf16 checkpoint of that config once (and its
// MXFP4 quantization with the default recipe; random_checkpoint.h), then times decode steps at
// batch 1, 8 and 32 after a 128-token context, and a 512-token prefill, with bf16 and with MXFP4
// experts. Each checkpoint gets a synthetic tokenizer.json, so that `mxserve serve` runs it too.
// Decode is reported against the bandwidth floor: the bytes of every weight the step touches
// (attention, indexer, dense, shared experts, router, lm_head, and each routed expert that the
// router actually picked for some row, counted once) / bandwidth. Prefill by its linear layers'
// products (2 FLOPs per weight per row, the lm_head's for the last row only; attention's own
// products not counted) against the GEMM rate, and against the machine's dot-product ceilings
// (dot_peak.h: bf16 dot products, int8 for MXFP4 weights) probed in the same run: the prefill's
// share of those ceilings, per op with ops=1. Best of `repeats`.
//
//   model_bench [dir=/tmp/mxserve-bench-scale] [threads=0] [repeats=3] [steps=8]
//               [config=../shared/configs/bench-scale.json] [batches=1,8,32] [prefill=512 (0:
//               none)] [context=128] [flush=1 (evict the caches before each decode step)] [mxfp4=1]
//               [quant=mxfp4 (or fp8: DIR/fp8, every linear FP8 as `quantize --format fp8`)]
//               [bf16=1 (0: the MXFP4 checkpoint alone)] [tuned=1 (the MoE config from
//               configs/moe/; 0: default)] [spin_us=200 (how long idle pool workers poll before
//               sleeping; 0: sleep at once)] [activations=bf16 (fp32: exact bf16 GEMMs)]
//               [ops=0 (1: a table of each op's share of the time, its bytes or FLOPs, and its %
//               of the bandwidth floor or GEMM rate, after each measurement; model/op_profile.h)]
//               [floor=0 (1: after every timed decode step, the same minute's floor of that step:
//               each weight array it read (the routed experts its router picked), read again in
//               op order through the same pool as the GEMV kernels read it (8 streams of 16-row
//               groups per thread, 64-byte loads, each prefetched 1 KB ahead), caches flushed
//               first as for the step; medians and bests of both and their ratio)]
//               [prune=0 (1: the prefill's last layer carries only the logit row past its
//               attention, as the engine runs a prompt: ForwardOptions::prune_last_layer; the
//               FLOPs and % columns then stay blank, its rows being fewer)]
//               [kv=bf16 (the KV store: the engine's paged one in this --kv-cache-dtype, as
//               `bench offline` and serve run it; or contiguous: fp32 rows, copied before they
//               are attended)]
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/bandwidth.h"
#include "base/cpu_features.h"
#include "base/log.h"
#include "base/numerics.h"
#include "base/thread_pool.h"
#include "dot_peak.h"
#include "engine/engine.h"
#include "engine/model_factory.h"
#include "engine/offline_bench.h"
#include "io/model_config.h"
#include "kernels/bf16_packed.h"
#include "kernels/fp8.h"
#include "kernels/gemm_tiling.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"
#include "kv/paged_kv_store.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/tensor_plan.h"
#include "model/weight_bytes.h"
#include "quant/quantizer.h"
#include "random_checkpoint.h"

namespace fs = std::filesystem;

namespace {

using mx::bench::Now;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "model_bench: %s\n", what.c_str());
  std::exit(1);
}

// The prefill's compute ceilings: G(FL)OP/s of the bf16 dot products (bf16 and FP8 weights) and
// of the int8 ones (MXFP4 weights, Q8 activations), with the name of what they are.
struct Ceilings {
  double bf16 = 0, int8 = 0;
  std::string what;
  // Seconds the weights' products of `rows` rows of op i take at the ceilings.
  double Seconds(const mx::OpWeightCost& cost, int i, double rows) const {
    const double int8_macs = cost.int8_macs_per_row[i];
    return 2.0 * rows *
           ((cost.macs_per_row[i] - int8_macs) / (bf16 * 1e9) + int8_macs / (int8 * 1e9));
  }
};

// The op table of `steps` forwards of `rows` rows each (prof summed over them): decode rows are
// judged by the bytes each op's weights take from memory, prefill rows by their FLOPs (blank
// when the last layer was pruned: its ops ran on fewer rows).
void PrintOps(const mx::OpProfile& prof, int64_t steps, int64_t rows, bool decode,
              const mx::OpWeightCost& cost, double bw_gbps, const Ceilings& ceilings,
              bool pruned = false) {
  const double total = prof.Total();
  std::printf("\n| op | ms per step | share | %s | %% of %s |\n", decode ? "MB read" : "GFLOP",
              decode ? "bandwidth floor" : ceilings.what.c_str());
  std::printf("|---|---:|---:|---:|---:|\n");
  for (int i = 0; i < static_cast<int>(mx::Op::kCount); ++i) {
    const double sec = prof.seconds[i] / static_cast<double>(steps);
    if (prof.calls[i] == 0 && sec < 1e-5) continue;
    // the lm_head runs on the last row of a prefill only
    const double r = i == static_cast<int>(mx::Op::kLmHead) && !decode ? 1.0 : rows;
    const double work = decode   ? cost.bytes[i] / 1e6
                        : pruned ? 0.0
                                 : 2.0 * r * cost.macs_per_row[i] / 1e9;
    const double ceil = decode ? cost.bytes[i] / (bw_gbps * 1e9)
                               : ceilings.Seconds(cost, i, static_cast<double>(r));
    std::printf("| %s | %.2f | %.1f%% | %s | %s |\n", std::string(mx::kOpNames[i]).c_str(),
                sec * 1e3, 100.0 * prof.seconds[i] / total,
                work > 0 ? fmt::format("{:.1f}", work).c_str() : "",
                work > 0 ? fmt::format("{:.0f}%", 100.0 * ceil / sec).c_str() : "");
  }
  std::printf("\n");
}

struct Result {
  double seconds = 1e30;
  double bytes = 0;
};

// One array of weights a decode step streams, in groups of 16 rows (the kernels' packed layout:
// a GEMV reads 8 groups at once, each its own stream; the scale arrays are one group).
struct Span {
  const uint8_t* p;
  int64_t bytes;
  int64_t group = 0;          // bytes of one 16-row group (0: the whole array)
  mx::Op op = mx::Op::kNorm;  // the op whose kernels read it
};

// XOR of the 64-byte lines of [p, p + n) read as the bf16 / MXFP4 / FP8 GEMV kernels read their
// weights: 8 streams at once (groups of `group` bytes), each prefetched as theirs are (into L2,
// kWeightPrefetchAhead ahead), 64-byte loads. note: a plain sequential sum (base/bandwidth.h
// SumBytes) read a real-width step's bytes ~15% slower than the kernels themselves (one stream per
// thread).
__attribute__((target("avx512f"))) uint64_t ReadLikeGemvAvx512(const uint8_t* p, int64_t n,
                                                               int64_t group) {
  constexpr int kStreams = 8;
  constexpr int64_t kAhead = mx::kWeightPrefetchAhead;
  __m512i acc[kStreams];
  for (__m512i& a : acc) a = _mm512_setzero_si512();
  int64_t b = 0;
  const int64_t g = group > 0 && group % 64 == 0 ? group : n;
  for (; b + kStreams * g <= n; b += kStreams * g) {
    for (int64_t o = 0; o < g; o += 64) {
      for (int s = 0; s < kStreams; ++s) {
        const uint8_t* q = p + b + s * g + o;
        _mm_prefetch(reinterpret_cast<const char*>(q) + kAhead, _MM_HINT_T1);
        acc[s] = _mm512_xor_si512(acc[s], _mm512_loadu_si512(q));
      }
    }
  }
  uint64_t r = mx::SumBytes(p + b, n - b, true);  // fewer than 8 groups left
  for (const __m512i& a : acc) r += static_cast<uint64_t>(_mm512_reduce_add_epi64(a));
  return r;
}

uint64_t ReadLikeGemv(const uint8_t* p, int64_t n, int64_t group) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
  return avx512 ? ReadLikeGemvAvx512(p, n, group) : mx::SumBytes(p, n, true);
}

// The arrays the kernels read for `w` (its packed layout; an empty weight: none).
void AddWeightArrays(const mx::LinearWeight& w, mx::Op op, std::vector<Span>& out) {
  if (w.empty()) return;
  const auto u8 = [](const void* p) { return static_cast<const uint8_t*>(p); };
  const auto groups = [&](int64_t bytes) {
    return bytes / ((w.n + 15) / 16);  // one 16-row group of a packed array
  };
  if (w.bf16p != nullptr) {
    const int64_t b = 2 * mx::Bf16PackedElems(w.n, w.k);
    out.push_back({u8(w.bf16p), b, groups(b), op});
  } else if (w.bf16 != nullptr) {
    out.push_back({u8(w.bf16), 2 * w.n * w.k, 32 * w.k, op});
  } else if (w.f32 != nullptr) {
    out.push_back({u8(w.f32), 4 * w.n * w.k, 64 * w.k, op});
  } else if (w.is_mxfp4()) {
    const int64_t b = mx::Mxfp4PackedCodeBytes(w.n, w.k);
    out.push_back({w.mx_q, b, groups(b), op});
    out.push_back({w.mx_e, mx::Mxfp4PackedScaleBytes(w.n, w.k), 0, op});
  } else if (w.fp8p != nullptr) {
    const int64_t b = mx::Fp8PackedBytes(w.n, w.k);
    out.push_back({w.fp8p, b, groups(b), op});
    out.push_back({u8(w.fp8p_s), 4 * mx::Fp8PackedScales(w.n, w.k), 0, op});
  }
}

// Every weight array a decode step reads, in the forward's op order: per layer attention,
// indexer, dense MLP or router + shared + the routed experts `router` picked (once each); then
// the lm_head. The same set StepWeightBytes counts (model/weight_bytes.h).
std::vector<Span> StepArrays(const mx::ModelWeights& w,
                             const std::map<int64_t, mx::RouterChoice>& router) {
  std::vector<Span> out;
  const auto mlp = [&](const mx::MlpWeights& m, mx::Op op) {
    for (const mx::LinearWeight* x : {&m.gate_proj, &m.up_proj, &m.down_proj}) {
      AddWeightArrays(*x, op, out);
    }
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const mx::LayerWeights& lw = w.layers[l];
    AddWeightArrays(lw.attn.q_a_proj, mx::Op::kQkvA, out);
    AddWeightArrays(lw.attn.kv_a_proj_with_mqa, mx::Op::kQkvA, out);
    AddWeightArrays(lw.attn.q_b_proj, mx::Op::kQb, out);
    AddWeightArrays(lw.attn.kv_b_proj, mx::Op::kKvB, out);
    if (lw.has_indexer) {
      for (const mx::LinearWeight* x :
           {&lw.indexer.wq_b, &lw.indexer.wk, &lw.indexer.weights_proj}) {
        AddWeightArrays(*x, mx::Op::kIndexer, out);
      }
    }
    AddWeightArrays(lw.attn.o_proj, mx::Op::kOProj, out);
    if (!lw.is_moe) {
      mlp(lw.mlp, mx::Op::kDenseMlp);
      continue;
    }
    AddWeightArrays(lw.moe.gate, mx::Op::kRouter, out);
    const auto it = router.find(static_cast<int64_t>(l));
    if (it != router.end()) {
      for (int32_t e : std::set<int32_t>(it->second.experts.begin(), it->second.experts.end())) {
        mlp(lw.moe.experts[e], mx::Op::kExperts);
      }
    }
    if (lw.moe.has_shared) mlp(lw.moe.shared_experts, mx::Op::kExperts);
  }
  AddWeightArrays(w.lm_head, mx::Op::kLmHead, out);
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"dir", "/tmp/mxserve-bench-scale"},
      {"threads", "0"},
      {"repeats", "3"},
      {"steps", "8"},
      {"config", std::string(MX_SOURCE_DIR) + "/../shared/configs/bench-scale.json"},
      {"batches", "1,8,32"},
      {"prefill", "512"},
      {"context", "128"},
      {"flush", "1"},
      {"mxfp4", "1"},
      {"quant", "mxfp4"},
      {"bf16", "1"},
      {"tuned", "1"},
      {"spin_us", std::to_string(mx::ThreadPool::kDefaultSpinUs)},
      {"activations", "bf16"},
      {"ops", "0"},
      {"prune", "0"},
      {"floor", "0"},
      {"kv", "bf16"},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t eq = s.find('=');
    if (eq == std::string::npos || !a.contains(s.substr(0, eq))) {
      Die("unknown argument " + s + " (key=value; see the file's header)");
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  (void)mx::SetLogLevel("warn");
  if (a["quant"] != "mxfp4" && a["quant"] != "fp8") Die("quant: mxfp4 or fp8");
  const std::string bf16_dir = a["dir"] + "/bf16", mx_dir = a["dir"] + "/" + a["quant"];
  if (!fs::exists(bf16_dir + "/model.safetensors") &&
      !fs::exists(bf16_dir + "/model.safetensors.index.json")) {
    std::printf("writing the random bench-scale checkpoint to %s ...\n", bf16_dir.c_str());
    std::fflush(stdout);
    fs::create_directories(bf16_dir);
    if (auto s = mx::bench::WriteCutConfig(a["config"], {}, bf16_dir + "/config.json"); !s.ok()) {
      Die(s.ToString());
    }
    mx::ThreadPool gen_pool;
    if (auto s = mx::bench::WriteRandomBf16(bf16_dir, 5'000'000'000, 0, gen_pool); !s.ok()) {
      Die(s.ToString());
    }
  }
  const bool with_mx = a["mxfp4"] == "1";
  if (with_mx && !fs::exists(mx_dir + "/config.json")) {
    std::printf("quantizing it (the default %s recipe) to %s ...\n", a["quant"].c_str(),
                mx_dir.c_str());
    std::fflush(stdout);
    mx::quant::QuantizeOptions qo;
    qo.format = a["quant"];
    if (auto s = mx::quant::QuantizeCheckpoint(bf16_dir, mx_dir, qo); !s.ok()) {
      Die(s.status().ToString());
    }
  }
  for (const std::string& d : {bf16_dir, mx_dir}) {
    if (d == mx_dir && !with_mx) continue;
    if (auto s = mx::bench::EnsureSyntheticTokenizer(d); !s.ok()) Die(s.ToString());
  }
  mx::ThreadPool pool(std::stoi(a["threads"]), std::stoi(a["spin_us"]));
  const mx::CpuFeatures& cpu = mx::GetCpuFeatures();
  const bool dot_ceilings = cpu.avx512_core() && cpu.avx512bf16 && cpu.avx512vnni;
  // flush=1: before each timed decode step, read StreamBytes() (4× the last-level cache) so that
  // the step reads its weights from memory, as a model many times the cache would. note: a
  // 480 MB L3 (the Intel Xeon hosts) holds the MXFP4 checkpoint's 0.47 GB per step, but not
  // bf16's 0.86 GB: without the flush their ratio measured the cache, not the formats.
  mx::CacheFlusher flush(pool, a["flush"] == "1" ? static_cast<size_t>(mx::StreamBytes()) : 0);
  // kv: a KV cache dtype of the engine's paged store, or "contiguous" (ContiguousKvStore).
  std::optional<mx::KvCacheDtype> kv_dtype;
  if (a["kv"] != "contiguous") {
    auto d = mx::ParseKvCacheDtype(a["kv"]);
    if (!d.ok()) Die("kv: " + d.status().ToString() + " (or contiguous)");
    kv_dtype = *d;
  }
  auto acts = mx::ParseGemmActivations(a["activations"]);
  if (!acts.ok()) Die(acts.status().ToString());
  auto kt_or = mx::ResolveKernels(std::nullopt, *acts);
  if (!kt_or.ok()) Die(kt_or.status().ToString());
  const mx::KernelTable& kt = **kt_or;
  const int repeats = std::stoi(a["repeats"]);
  // Ceilings: read bandwidth, and the kernels' bf16 GEMM rate at a prefill-like shape.
  double bw = 0;
  for (int i = 0; i < repeats; ++i) bw = std::max(bw, mx::MeasureReadBandwidthGBps(pool));
  // The GEMM rate is the best over the tilings the MoE tuner chooses from (row tile × W rows
  // per cache block): with W as one block (the default) a 2048-wide W does not stay in L2 and
  // the probe measured L3 traffic, a third of what the prefill itself reached.
  double gemm_gflops = 0;
  mx::GemmTiling best_tiling;
  {
    const int64_t m = 512, k = 2048, n = 2048;
    std::vector<float> x(m * k, 0.5f), y(m * n);
    std::vector<uint16_t> wt(n * k, mx::F32ToBf16(0.01f));
    for (int mr : {0, 2, 4}) {
      for (int nb : {0, 32, 64, 128, 256}) {
        const mx::GemmTiling t{mr, nb};
        for (int i = 0; i < repeats; ++i) {
          const double t0 = Now();
          mx::GemmBf16(kt, pool, x.data(), m, k, wt.data(), n, y.data(), t);
          const double g = 2.0 * m * n * k / (Now() - t0) / 1e9;
          if (g > gemm_gflops) {
            gemm_gflops = g;
            best_tiling = t;
          }
        }
      }
    }
  }
  std::printf(
      "\nmachine: %d threads, kernels %s (%s GEMM activations), read bandwidth %.1f GB/s (best of "
      "%d), "
      "bf16 GEMM 512x2048x2048 %.1f GFLOP/s with these kernels at their best tiling (mr %d, "
      "nb %d; the machine's own ceilings: ../shared/reference/cpu-anchors.md)\n\n",
      pool.size(), mx::KernelLevelName(kt.level), mx::GemmActivationsName(kt.bf16_activations), bw,
      repeats, gemm_gflops, best_tiling.mr, best_tiling.nb);
  std::printf(
      "| weights | measurement | tok/s | ms per step | GB touched per step | "
      "%% of bandwidth floor | GFLOP/s | %% of GEMM rate |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<int> batches;
  {
    std::stringstream ss(a["batches"]);
    std::string x;
    while (std::getline(ss, x, ',')) batches.push_back(std::stoi(x));
  }
  const int64_t ctx = std::stoll(a["context"]), steps = std::stoll(a["steps"]);
  const int64_t n_prefill = std::stoll(a["prefill"]);
  const bool prune = a["prune"] == "1";
  if (a["prune"] != "0" && !prune) Die("prune must be 0 or 1");
  if (n_prefill < 0) Die("prefill must be >= 0 (0: no prefill measurement)");
  std::vector<std::string> dirs;
  if (a["bf16"] == "1") dirs.push_back(bf16_dir);
  if (with_mx) dirs.push_back(mx_dir);
  for (const std::string& dir : dirs) {
    mx::ModelLoadOptions lo;
    lo.model_dir = dir;
    lo.gemm_activations = *acts;
    lo.untuned_moe = a["tuned"] != "1";
    lo.tokenizer = mx::TokenizerLoad::kNone;
    auto loaded = mx::LoadModel(lo);
    if (!loaded.ok()) Die(loaded.status().ToString());
    const std::unique_ptr<mx::Model>& model = loaded->model;
    const mx::ModelConfig& c = model->config();
    const mx::MoeTuning& moe = loaded->moe;
    const std::string label =
        fmt::format("{}{}",
                    dir == bf16_dir         ? "bf16"
                    : a["quant"] == "mxfp4" ? "MXFP4 experts"
                                            : "FP8 (every linear but the lm_head)",
                    moe.tuned ? " (tuned MoE)" : "");
    // The KV store: the engine's (paged, kv=bf16 as serve by default, read in place by the
    // attention) or kv=contiguous (fp32 rows, copied before they are attended). Sequences 0..n-1.
    auto make_kv = [&](int64_t n, int64_t positions) -> std::unique_ptr<mx::KvStore> {
      if (!kv_dtype) {
        auto store = std::make_unique<mx::ContiguousKvStore>(c, positions);
        for (int64_t s = 0; s < n; ++s) store->AddSequence();
        return store;
      }
      const int64_t page = mx::EngineOptions{}.page_size, per = (positions + page - 1) / page;
      auto store =
          std::make_unique<mx::PagedKvStore>(c, page, n * per, *kv_dtype, model->kv_scales());
      for (int64_t s = 0; s < n; ++s) {
        std::vector<int32_t>& table = store->PageTable(s);
        for (int64_t p = 0; p < per; ++p) table.push_back(static_cast<int32_t>(s * per + p));
      }
      return store;
    };
    std::mt19937_64 rng(1);
    // Decode at each batch size: every sequence has `ctx` tokens of context, then `steps`
    // single-token steps; the best step of all repeats.
    const bool ops = a["ops"] == "1";
    const bool with_floor = a["floor"] == "1";
    std::vector<uint64_t> floor_sums(pool.size());
    for (int b : batches) {
      Result best;
      mx::OpProfile prof;
      int64_t prof_steps = 0;
      std::map<int64_t, mx::RouterChoice> last_router;
      std::vector<double> floor_reads, floor_steps;
      std::array<double, static_cast<int>(mx::Op::kCount)> floor_op{};  // Σ read seconds
      double floor_bytes = 0;
      for (int rep = 0; rep < repeats; ++rep) {
        const std::unique_ptr<mx::KvStore> kv_store = make_kv(b, ctx + steps + 1);
        mx::KvStore& kv = *kv_store;
        mx::ForwardBatch pre;
        for (int s = 0; s < b; ++s) {
          pre.seqs.push_back({s, 0, mx::RandomTokenIds(ctx, c.vocab_size, rng), {}});
        }
        mx::ForwardOptions po;
        po.moe = moe.For(pre);
        if (!model->Forward(pre, po, kv, kt, pool).ok()) Die("prefill");
        for (int64_t st = 0; st < steps; ++st) {
          mx::ForwardBatch fb;
          for (int s = 0; s < b; ++s) {
            fb.seqs.push_back({s, ctx + st, mx::RandomTokenIds(1, c.vocab_size, rng), {}});
          }
          mx::ForwardOptions o;
          o.want_router = true;
          o.moe = moe.For(fb);
          if (ops) o.profile = &prof;
          flush();
          const double t0 = Now();
          auto out = model->Forward(fb, o, kv, kt, pool);
          const double t = Now() - t0;
          if (!out.ok()) Die(out.status().ToString());
          ++prof_steps;
          last_router = out->router;
          if (t < best.seconds) best = {t, mx::StepWeightBytes(model->weights(), out->router)};
          if (with_floor) {
            // The same arrays, each split over the pool as a GEMV splits its rows.
            const std::vector<Span> arrays = StepArrays(model->weights(), out->router);
            flush();
            const double f0 = Now();
            double s0 = f0;
            for (const Span& sp : arrays) {
              // Split by whole groups (as the kernels split rows), else by bytes.
              const int64_t g = sp.group > 0 ? sp.group : sp.bytes;
              pool.parallel_for(0, (sp.bytes + g - 1) / g, [&](int64_t lo, int64_t hi, int th) {
                const int64_t end = std::min(sp.bytes, hi * g);
                floor_sums[th] += ReadLikeGemv(sp.p + lo * g, end - lo * g, sp.group);
              });
              const double s1 = Now();
              floor_op[static_cast<int>(sp.op)] += s1 - s0;
              s0 = s1;
            }
            floor_reads.push_back(Now() - f0);
            floor_steps.push_back(t);
            floor_bytes = 0;
            for (const Span& sp : arrays) floor_bytes += static_cast<double>(sp.bytes);
          }
        }
      }
      const double floor = best.bytes / (bw * 1e9);
      std::printf("| %s | decode, batch %d | %.1f | %.2f | %.3f | %.0f%% | | |\n", label.c_str(), b,
                  b / best.seconds, best.seconds * 1e3, best.bytes / 1e9,
                  100.0 * floor / best.seconds);
      if (with_floor) {
        std::vector<double> ratio;
        for (size_t i = 0; i < floor_reads.size(); ++i) {
          ratio.push_back(floor_reads[i] / floor_steps[i]);
        }
        const double best_read = *std::min_element(floor_reads.begin(), floor_reads.end());
        const double best_step = *std::min_element(floor_steps.begin(), floor_steps.end());
        std::printf(
            "  floor, batch %d (%zu steps, each followed by a read of its %.3f GB): step median "
            "%.2f ms (best %.2f), read median %.2f ms = %.1f GB/s (best %.2f ms = %.1f GB/s); "
            "read / step: median of pairs %.1f%%, best / best %.1f%%\n",
            b, floor_reads.size(), floor_bytes / 1e9, Median(floor_steps) * 1e3, best_step * 1e3,
            Median(floor_reads) * 1e3, floor_bytes / Median(floor_reads) / 1e9, best_read * 1e3,
            floor_bytes / best_read / 1e9, 100.0 * Median(ratio), 100.0 * best_read / best_step);
        std::vector<std::string> pairs;
        for (size_t i = 0; i < floor_reads.size(); ++i) {
          pairs.push_back(fmt::format("{:.1f}/{:.1f}", floor_steps[i] * 1e3, floor_reads[i] * 1e3));
        }
        std::printf("  samples (step/read ms): %s\n",
                    fmt::format("{}", fmt::join(pairs, " ")).c_str());
        if (ops) {  // the same steps' op times against their ops' reads
          std::printf("\n| op | ms per step | same-minute read of its weights, ms | read / op |\n");
          std::printf("|---|---:|---:|---:|\n");
          const auto n = static_cast<double>(floor_reads.size());
          for (int i = 0; i < static_cast<int>(mx::Op::kCount); ++i) {
            if (floor_op[i] == 0) continue;
            const double op_ms = prof.seconds[i] / static_cast<double>(prof_steps) * 1e3;
            std::printf("| %s | %.2f | %.2f | %.0f%% |\n", std::string(mx::kOpNames[i]).c_str(),
                        op_ms, floor_op[i] / n * 1e3, 100.0 * floor_op[i] / n * 1e3 / op_ms);
          }
        }
      }
      if (ops) {
        PrintOps(prof, prof_steps, b, true,
                 mx::OpWeightCosts(model->weights(), last_router, c.num_experts_per_tok), bw, {});
      }
      std::fflush(stdout);
    }
    // Prefill of n_prefill tokens in one sequence, one pass (offline_bench's prefill with a
    // chunk of the whole prompt; `mxserve bench offline` runs the engine's chunks). prefill=0:
    // none.
    if (n_prefill == 0) continue;
    double best = 1e30;
    mx::OpProfile prof;
    // The dot-product ceilings, probed just before and just after the prefill runs (the best of
    // both): the same minutes as the prefill. Without AVX-512 BF16 / VNNI, the GEMM rate.
    Ceilings ceil{gemm_gflops, gemm_gflops, "GEMM rate"};
    auto probe = [&] {
      if (!dot_ceilings) return;
      ceil.bf16 = std::max(ceil.bf16, mx::bench::DotPeak(pool, mx::bench::Bf16DotLoop, 3));
      ceil.int8 = std::max(ceil.int8, mx::bench::DotPeak(pool, mx::bench::Int8DotLoop, 3));
    };
    if (dot_ceilings) ceil = {0, 0, "dot ceiling"};
    probe();
    for (int rep = 0; rep < repeats; ++rep) {
      const std::unique_ptr<mx::KvStore> kv_store = make_kv(1, n_prefill);
      mx::KvStore& kv = *kv_store;
      const int64_t seq = 0;
      const std::vector<int32_t> ids = mx::RandomTokenIds(n_prefill, c.vocab_size, rng);
      mx::ForwardOptions po;
      po.moe = moe.For(n_prefill);  // one chunk of the whole prompt
      po.prune_last_layer = prune;
      if (ops && (rep > 0 || repeats == 1)) po.profile = &prof;  // warm passes only
      auto step = [&](const mx::ForwardBatch& b) {
        return model->Forward(b, po, kv, kt, pool).status();
      };
      const double t0 = Now();
      if (auto st = mx::PrefillChunked(step, seq, 0, ids, n_prefill); !st.ok()) {
        Die(st.ToString());
      }
      best = std::min(best, Now() - t0);
    }
    probe();
    // The linear layers' products (the lm_head's of the last row only): bf16 dot products, and
    // int8 ones for MXFP4 weights; attention's own products, norms and the rest are not counted.
    const mx::OpWeightCost cost = mx::OpWeightCosts(model->weights(), {}, c.num_experts_per_tok);
    double at_ceil = 0, bf16_flops = 0, int8_ops = 0;
    for (int i = 0; i < static_cast<int>(mx::Op::kCount); ++i) {
      const double r = i == static_cast<int>(mx::Op::kLmHead) ? 1.0 : n_prefill;
      at_ceil += ceil.Seconds(cost, i, r);
      bf16_flops += 2.0 * r * (cost.macs_per_row[i] - cost.int8_macs_per_row[i]);
      int8_ops += 2.0 * r * cost.int8_macs_per_row[i];
    }
    const double flops = bf16_flops + int8_ops;
    if (prune) {
      std::printf("| %s | prefill, %lld tokens, last layer pruned | %.1f | %.1f | | | | |\n",
                  label.c_str(), static_cast<long long>(n_prefill), n_prefill / best, best * 1e3);
    } else {
      std::printf("| %s | prefill, %lld tokens | %.1f | %.1f | | | %.1f | %.0f%% |\n",
                  label.c_str(), static_cast<long long>(n_prefill), n_prefill / best, best * 1e3,
                  flops / best / 1e9, 100.0 * flops / best / 1e9 / gemm_gflops);
      std::printf(
          "  prefill against the %s (vdpbf16ps %.0f GFLOP/s, vpdpbusd %.0f GOP/s%s): its linear "
          "layers' %.1f bf16 GFLOP + %.1f int8 GOP take %.1f ms there = %.1f%% of the prefill's "
          "%.1f ms\n",
          ceil.what.c_str(), ceil.bf16, ceil.int8,
          dot_ceilings ? ", register-only loops on these threads just before and after" : "",
          bf16_flops / 1e9, int8_ops / 1e9, at_ceil * 1e3, 100.0 * at_ceil / best, best * 1e3);
    }
    if (ops) PrintOps(prof, std::max(1, repeats - 1), n_prefill, false, cost, bw, ceil, prune);
    std::fflush(stdout);
  }
  return 0;
}
