// The memory plan (memory_plan.h): weights from the headers, KV from the config, scratch from
// the widths, and the fit check with its advice.
#include "engine/memory_plan.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kv/paged_kv_store.h"

namespace mx {

namespace {

constexpr int64_t kUnknownAvailable = int64_t{8} << 30;  // as the engine assumes

std::string Bytes(int64_t b) {
  const double x = static_cast<double>(b);
  if (b >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", x / (1 << 30));
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", x / (1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", x / 1024);
  return fmt::format("{} B", b);
}

KvPlan PlanKvRows(const ModelConfig& c, KvCacheDtype dtype) {
  KvPlan kv;
  kv.dtype = KvCacheDtypeName(dtype);
  kv.dtype_bytes = KvCacheDtypeBytes(dtype);
  const int64_t n_layers = c.num_hidden_layers + (c.num_nextn_predict_layers > 0 ? 1 : 0);
  for (int64_t l = 0; l < n_layers; ++l) {
    KvLayerPlan r;
    r.layer = l;
    r.mtp = l == c.num_hidden_layers;
    r.latent_values = c.kv_lora_rank;
    r.rope_values = c.qk_rope_head_dim;
    r.indexer_values = c.has_indexer && c.is_full_indexer_layer(l) ? c.index_head_dim : 0;
    r.bytes_per_token = (r.latent_values + r.rope_values + r.indexer_values) * kv.dtype_bytes;
    kv.bytes_per_token += r.bytes_per_token;
    kv.layers.push_back(r);
  }
  return kv;
}

// Activations of one step of `rows` rows on one rank (the forward's buffers grow to the largest
// step and stay): per row the residual stream and the layer's buffers, the attention's query,
// latent and expanded rows, the indexer's queries, the larger of the dense MLP and the MoE
// (top-k experts + shared + router logits), and the logits of the rows that sample; per thread
// the indexer's scores over the context.
int64_t ScratchBytes(const ModelConfig& c, const ModelShard& s, int64_t rows, int64_t logit_rows,
                     int64_t threads) {
  const int64_t D = c.hidden_size, Hl = s.Count(c.num_attention_heads);
  const int64_t F = s.expert_parallel ? c.moe_intermediate_size : s.Count(c.moe_intermediate_size);
  const int64_t Fs = s.Count(c.moe_intermediate_size * c.n_shared_experts);
  const int64_t Fd = s.Count(c.intermediate_size);
  int64_t per_row = 5 * D + c.q_lora_rank + Hl * c.qk_head_dim() + 2 * Hl * c.kv_lora_rank +
                    Hl * (c.qk_nope_head_dim + c.v_head_dim);
  if (c.has_indexer)
    per_row += c.index_n_heads * c.index_head_dim + c.index_head_dim + c.index_n_heads;
  const int64_t moe =
      c.n_routed_experts > 0 ? 2 * c.num_experts_per_tok * F + 2 * Fs + c.n_routed_experts : 0;
  per_row += std::max(2 * Fd, moe);
  int64_t b = 4 * (rows * per_row + logit_rows * c.vocab_size);
  if (c.has_indexer) b += 8 * threads * c.max_position_embeddings;
  return b;
}

}  // namespace

int64_t AutoKvTokens(double mem_fraction, int64_t available, int64_t bytes_per_token, int64_t cap) {
  const int64_t tokens = static_cast<int64_t>(mem_fraction * static_cast<double>(available)) /
                         std::max<int64_t>(bytes_per_token, 1);
  return std::min(tokens, cap);
}

Result<MemoryPlan> PlanMemory(const MemoryPlanOptions& o) {
  if (o.page_size < 1) return InvalidArgument("--page-size must be >= 1, got {}", o.page_size);
  if (o.tp < 1 || o.dp < 1) return InvalidArgument("--tp and --dp must be >= 1");
  MX_ASSIGN_OR_RETURN(
      ModelConfig c,
      LoadModelConfig((std::filesystem::path(o.model_dir) / "config.json").string()));
  MX_ASSIGN_OR_RETURN(KvCacheDtype dtype, ParseKvCacheDtype(o.kv_cache_dtype));
  MX_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(o.model_dir));
  MemoryPlan p;
  p.options = o;
  p.architecture = ArchitectureName(c.architecture);
  p.dp = o.dp;
  p.mpi = o.mpi_rank >= 0;
  const bool ep = o.expert_parallel && o.tp > 1;
  for (int r = p.mpi ? o.mpi_rank : 0; r < (p.mpi ? o.mpi_rank + 1 : o.tp); ++r) {
    auto w = PlanWeights(c, ckpt, ModelShard{r, o.tp, ep});
    if (!w.ok()) return w.status().WithContext(o.model_dir);
    RankPlan rank;
    rank.tp_rank = r;
    rank.weights = std::move(w).value();
    p.weights_bytes += rank.weights.anon_bytes;
    p.mapped_bytes += rank.weights.mapped_bytes;
    p.load_peak_bytes = std::max(p.load_peak_bytes, rank.weights.largest_transient_bytes);
    p.ranks.push_back(std::move(rank));
  }
  // KV: one copy per rank; the automatic budget as the engine computes it once the replica's
  // weights are in (CreateDpEngine divides --mem-fraction-static by dp, CreateEngine by the
  // in-process tp).
  p.kv = PlanKvRows(c, dtype);
  p.kv.page_size = o.page_size;
  p.kv.automatic = o.max_total_tokens <= 0;
  int64_t tokens = o.max_total_tokens;
  if (p.kv.automatic) {
    const double fraction = o.mem_fraction / o.dp / (p.mpi ? 1 : o.tp);
    const int64_t avail = o.available_bytes.value_or(kUnknownAvailable) - p.weights_bytes;
    tokens = AutoKvTokens(fraction, avail, p.kv.bytes_per_token,
                          int64_t{o.max_running_requests} * c.max_position_embeddings);
  }
  p.kv.pages = std::max<int64_t>(1, tokens / o.page_size);
  p.kv.tokens = p.kv.pages * o.page_size;
  p.kv.bytes = p.kv.tokens * p.kv.bytes_per_token;
  // Scratch: every rank runs the step on threads of its own.
  const int64_t threads =
      o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const int64_t per_rank_threads =
      std::max<int64_t>(1, threads / (p.mpi ? 1 : int64_t{o.dp} * o.tp));
  p.scratch_rows = o.chunked_prefill_size + o.max_running_requests;
  for (RankPlan& r : p.ranks) {
    r.kv_bytes = p.kv.bytes;
    r.scratch_bytes =
        ScratchBytes(c, r.weights.shard, p.scratch_rows, o.max_running_requests, per_rank_threads);
    p.process_bytes += r.total_bytes();
  }
  const int64_t replicas = p.mpi ? 1 : o.dp;
  p.process_bytes *= replicas;
  p.weights_bytes *= replicas;
  p.mapped_bytes *= replicas;
  // The load: the weights of every replica loaded before, plus the largest transient copy.
  p.load_peak_bytes += p.weights_bytes;
  return p;
}

std::string DescribePlan(const MemoryPlan& p) {
  const MemoryPlanOptions& o = p.options;
  const std::string group =
      p.mpi ? fmt::format("MPI rank {} of {} (a process each)", o.mpi_rank, o.tp)
            : fmt::format("one process, {} replica(s) x {} rank(s)", p.dp, o.tp);
  std::string s =
      fmt::format("memory plan for {} ({}): {}{}\n",
                  o.model_name.empty() ? o.model_dir : o.model_name, p.architecture, group,
                  o.tp > 1 ? (o.expert_parallel ? ", expert parallel" : ", tensor parallel") : "");
  for (const RankPlan& r : p.ranks) {
    s += fmt::format(
        "  weights of rank {}: {} tensors, {} in the checkpoint -> {} in memory{}\n", r.tp_rank,
        r.weights.tensors, Bytes(r.weights.file_bytes), Bytes(r.weights.anon_bytes),
        r.weights.mapped_bytes > 0
            ? fmt::format(" + {} used in place from the mapped file", Bytes(r.weights.mapped_bytes))
            : "");
    for (const WeightFormatPlan& f : r.weights.formats) {
      s += fmt::format("    {:<8} {:>7} tensors {:>11} -> {:>11}  {}\n", f.format, f.tensors,
                       f.format == "derived" ? "-" : Bytes(f.file_bytes), Bytes(f.anon_bytes),
                       f.where);
    }
    if (p.ranks.size() > 1 && r.tp_rank == 0) s += "    (the other ranks: their totals below)\n";
    if (p.ranks.size() > 1) break;
  }
  // The KV row: layers grouped by what they hold.
  const KvPlan& kv = p.kv;
  int64_t plain = 0, full = 0;
  for (const KvLayerPlan& l : kv.layers) (l.indexer_values > 0 ? full : plain) += l.mtp ? 0 : 1;
  const KvLayerPlan& first = kv.layers.front();
  const int64_t idx = std::max_element(kv.layers.begin(), kv.layers.end(),
                                       [](const KvLayerPlan& a, const KvLayerPlan& b) {
                                         return a.indexer_values < b.indexer_values;
                                       })
                          ->indexer_values;
  std::string layers = fmt::format("{} layers x ({} latent + {} rope)", plain + full,
                                   first.latent_values, first.rope_values);
  if (full > 0) layers += fmt::format(" + {} full-indexer layers x {} indexer keys", full, idx);
  if (kv.layers.back().mtp) {
    const KvLayerPlan& m = kv.layers.back();
    layers += fmt::format(" + the MTP layer ({} values)",
                          m.latent_values + m.rope_values + m.indexer_values);
  }
  s += fmt::format("  KV cache {}: {} bytes per token = [{}] x {} byte(s)\n", kv.dtype,
                   kv.bytes_per_token, layers, kv.dtype_bytes);
  s += fmt::format("    x {} tokens ({} pages of {}; {}) = {} per copy, one copy per rank\n",
                   kv.tokens, kv.pages, kv.page_size,
                   kv.automatic ? fmt::format("auto: --mem-fraction-static {:.2f} of the memory "
                                              "left after the weights",
                                              o.mem_fraction)
                                : "--max-total-tokens",
                   Bytes(kv.bytes));
  s += fmt::format(
      "  scratch: ~{} per rank (a step of {} rows: --chunked-prefill-size {} + "
      "--max-running-requests {})\n",
      Bytes(p.ranks.front().scratch_bytes), p.scratch_rows, o.chunked_prefill_size,
      o.max_running_requests);
  for (const RankPlan& r : p.ranks) {
    s += fmt::format("  rank {}: weights {} + KV {} + scratch {} = {}\n", r.tp_rank,
                     Bytes(r.weights.anon_bytes), Bytes(r.kv_bytes), Bytes(r.scratch_bytes),
                     Bytes(r.total_bytes()));
  }
  s += fmt::format("  this process: {}{} (peak while loading {}){}", Bytes(p.process_bytes),
                   p.dp > 1 && !p.mpi ? fmt::format(" for {} replicas", p.dp) : "",
                   Bytes(p.load_peak_bytes),
                   o.available_bytes ? fmt::format(" of {} available", Bytes(*o.available_bytes))
                                     : ", available memory unknown");
  return s;
}

Status CheckPlansFit(const std::vector<MemoryPlan>& plans, int64_t available) {
  int64_t total = 0, need = 0;
  for (const MemoryPlan& p : plans) {
    need = std::max(need, total + p.load_peak_bytes);
    total += p.process_bytes;
  }
  need = std::max(need, total);
  if (need <= available) return Status::Ok();
  // Advice for the model whose KV pool is largest: the budget that fits, fp8 rows, more ranks.
  const MemoryPlan* big = &plans.front();
  auto kv_total = [](const MemoryPlan& p) {
    return p.kv.bytes * static_cast<int64_t>(p.ranks.size()) * (p.mpi ? 1 : p.dp);
  };
  for (const MemoryPlan& p : plans) {
    if (kv_total(p) > kv_total(*big)) big = &p;
  }
  const MemoryPlanOptions& o = big->options;
  const int64_t copies = static_cast<int64_t>(big->ranks.size()) * (big->mpi ? 1 : big->dp);
  std::vector<std::string> advice;
  const int64_t room = available - (need - kv_total(*big));
  const int64_t fit =
      room > 0 ? room / (copies * big->kv.bytes_per_token) / o.page_size * o.page_size : 0;
  if (fit >= o.page_size) {
    advice.push_back(fmt::format("--max-total-tokens {} (now {})", fit, big->kv.tokens));
  }
  if (big->kv.dtype_bytes > 1) {
    advice.push_back(fmt::format("--kv-cache-dtype fp8_e4m3 ({} bytes per token instead of {})",
                                 big->kv.bytes_per_token / big->kv.dtype_bytes,
                                 big->kv.bytes_per_token));
  }
  if (big->kv.automatic) {
    advice.push_back(fmt::format("a lower --mem-fraction-static (now {:.2f})", o.mem_fraction));
  }
  if (!big->mpi && big->dp > 1) {
    advice.push_back(
        fmt::format("fewer --dp replicas (each holds its own weights and KV; now {})", big->dp));
  }
  advice.push_back(
      "--tp N under `mpirun -np N` across N machines (each rank then holds about 1/N of the "
      "weights; docs/multi-node.md)");
  const std::string name = o.model_name.empty() ? o.model_dir : o.model_name;
  int64_t weights = 0, kv = 0, scratch = 0;
  for (const MemoryPlan& p : plans) {
    weights += p.weights_bytes;
    kv += kv_total(p);
    scratch += p.process_bytes - p.weights_bytes - kv_total(p);
  }
  return ResourceExhausted(
      "the memory plan does not fit: {} need{} {} (weights {} + KV {} + scratch {}{}) but {} is "
      "available; nothing was loaded. For model '{}' try {}",
      plans.size() == 1 ? "the model" : fmt::format("{} models", plans.size()),
      plans.size() == 1 ? "s" : "", Bytes(need), Bytes(weights), Bytes(kv), Bytes(scratch),
      need > total ? fmt::format("; {} while loading", Bytes(need)) : "", Bytes(available), name,
      fmt::join(advice, ", or "));
}

}  // namespace mx
