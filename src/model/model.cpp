// Model loading and the forward pass orchestration (see model.h).
#include "model/model.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>

#include "base/check.h"
#include "base/log.h"
#include "base/scratch.h"
#include "model/indexer.h"
#include "model/kv_scales.h"
#include "model/layer_context.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/weight_plan.h"
#include "parallel/communicator.h"

namespace mx {

Result<std::unique_ptr<Model>> Model::Load(const std::string& dir,
                                           const std::function<void(ModelConfig&)>& adjust,
                                           const ModelShard& shard) {
  MX_ASSIGN_OR_RETURN(ModelConfig config,
                      LoadModelConfig((std::filesystem::path(dir) / "config.json").string()));
  if (adjust) adjust(config);
  MX_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir));
  std::unique_ptr<Model> m(new Model(std::move(config), std::move(ckpt)));
  // The plan runs the loader's checks and says how much it will read (weight_plan.h).
  auto plan = PlanWeights(m->config_, m->ckpt_, shard);
  if (!plan.ok()) return plan.status().WithContext(dir);
  LoadProgress progress(shard.whole() ? dir : fmt::format("{} ({})", dir, shard.Describe()),
                        plan->file_bytes, plan->tensors, StderrIsTerminal());
  auto w = LoadModelWeights(m->config_, m->ckpt_, shard, &progress);
  if (!w.ok()) return w.status().WithContext(dir);
  progress.Finish();
  m->weights_ = std::move(w).value();
  std::string warning;
  auto scales = LoadKvScales(m->ckpt_, m->config_, &warning);
  if (!scales.ok()) return scales.status().WithContext(dir);
  if (!warning.empty()) MX_LOG_WARN("{}: {}", dir, warning);
  m->kv_scales_ = std::move(scales).value();
  return m;
}

namespace {

// The group of a sharded model's forward. REQUIRES: !shard.whole().
Communicator& Group(const LayerContext& ctx, const ModelShard& shard) {
  MX_CHECK_MSG(ctx.opts.comm != nullptr && ctx.opts.comm->size() == shard.size,
               "a sharded model needs ForwardOptions::comm of its group");
  return *ctx.opts.comm;
}

// Sums a row-parallel layer's partial output over the group (no-op for a whole model).
Status AllReduce(const LayerContext& ctx, const ModelShard& shard, float* x, int64_t n) {
  if (shard.whole()) return Status::Ok();
  return Group(ctx, shard).AllReduceSum(std::span<float>(x, n));
}

// x [rows, D]: an error naming the first non-finite value (row-major order) and where it is.
Status CheckFinite(ThreadPool& pool, const float* x, int64_t rows, int64_t D,
                   const std::string& what) {
  std::atomic<int64_t> first_bad{rows};
  ForRows(pool, rows, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      bool finite = true;
      for (int64_t d = 0; d < D; ++d) finite &= std::isfinite(x[r * D + d]);
      if (finite) continue;
      int64_t cur = first_bad.load();
      while (r < cur && !first_bad.compare_exchange_weak(cur, r)) {
      }
      return;
    }
  });
  const int64_t r = first_bad.load();
  for (int64_t d = 0; r < rows && d < D; ++d) {
    if (!std::isfinite(x[r * D + d])) {
      return Internal("non-finite value {} in {} (row {}, column {})", x[r * D + d], what, r, d);
    }
  }
  return Status::Ok();
}

// One decoder layer (§3.1) over every row of ctx: h [T, D] updated in place. `topk` [T, K] is
// written on full-indexer layers and read (IndexShare) on shared ones.
// `reuse_topk`: a full-indexer layer takes `topk` as given instead of running its indexer.
// `keep` (ascending rows, a suffix of each sequence's; nullptr: all): every row's KV (MLA latent,
// indexer key) is written, but the queries, attention and MLP run for these rows only; they end
// at the front of h, which then holds keep->size() rows.
// A decoder layer's activations, per thread (one forward at a time per thread; DP replicas and
// in-process TP ranks each run on their own threads): grown to the largest batch, then reused.
struct LayerBuffers {
  std::vector<float> a, cq, q, out, m;
};

LayerBuffers& LayerScratch() {
  static thread_local LayerBuffers b;
  return b;
}

// The context of rows `keep` of ctx (ascending; within each of ctx's groups a suffix, so
// positions stay contiguous): their positions, groups and RoPE tables.
LayerContext KeptRows(const LayerContext& ctx, const std::vector<int64_t>& keep) {
  LayerContext sub{ctx.c, ctx.kt, ctx.pool, ctx.kv, ctx.opts, {}, {}, {}, {}};
  size_t k = 0;
  for (const RowGroup& g : ctx.groups) {
    const int64_t begin = sub.rows();
    for (; k < keep.size() && keep[k] < g.end; ++k) {
      MX_CHECK(keep[k] >= g.begin && (sub.rows() == begin || keep[k] == keep[k - 1] + 1));
      sub.pos.push_back(ctx.pos[keep[k]]);
    }
    if (sub.rows() == begin) continue;
    MX_CHECK_EQ(keep[k - 1], g.end - 1);  // a suffix of the group
    sub.groups.push_back({g.seq, begin, sub.rows()});
  }
  MX_CHECK_EQ(k, keep.size());
  FillRopeTables(sub);
  return sub;
}

Status DecoderLayer(const LayerContext& ctx, const ModelShard& shard, const LayerWeights& lw,
                    int64_t layer, float* h, std::vector<int32_t>& topk, bool& have_topk,
                    RouterChoice* trace, bool reuse_topk = false,
                    const std::vector<int64_t>* keep = nullptr) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  LayerBuffers& buf = LayerScratch();
  float* a = Grow(buf.a, T * D);  // [T, D]
  ForRows(ctx.pool, T, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      ctx.kt.rms_norm(h + r * D, lw.input_layernorm.data(), eps, D, a + r * D);
    }
  });
  const bool own_topk = lw.has_indexer && !(reuse_topk && have_topk);
  // The query rows' context: ctx itself, or (keep) a context of the kept rows alone, after every
  // row's KV is written; a and h are compacted to the kept rows (ascending: row keep[i] >= i is
  // read before it is overwritten).
  std::optional<LayerContext> sub;
  if (keep != nullptr) {
    sub.emplace(KeptRows(ctx, *keep));
    MlaWriteKv(ctx, lw.attn, layer, a);
    if (own_topk) IndexerWriteKeys(ctx, lw.indexer, layer, a);
    const int64_t K = c.index_topk;
    for (size_t i = 0; i < keep->size(); ++i) {
      const int64_t r = (*keep)[i];
      std::copy_n(a + r * D, D, a + i * D);
      std::copy_n(h + r * D, D, h + i * D);
      if (c.has_indexer && !own_topk) std::copy_n(topk.data() + r * K, K, topk.data() + i * K);
    }
  }
  const LayerContext& qc = sub ? *sub : ctx;
  const int64_t n = qc.rows();  // query rows
  if (n == 0) return Status::Ok();
  float* cq = Grow(buf.cq, n * c.q_lora_rank);                  // [n, Rq]
  float* q = Grow(buf.q, n * lw.attn.heads * c.qk_head_dim());  // [n, H·(Dn+Dr)], local heads
  if (sub) {
    MlaQuery(qc, lw.attn, layer, a, cq, q);
  } else {
    MlaProject(ctx, lw.attn, layer, a, cq, q);
  }
  if (own_topk) {
    topk.assign(n * c.index_topk, -1);
    IndexerTopK(qc, lw.indexer, layer, a, cq, topk.data(), /*keys_written=*/sub.has_value());
    have_topk = true;
  }
  MX_CHECK_MSG(have_topk || !c.has_indexer, "shared indexer layer without a preceding full one");
  float* out = Grow(buf.out, n * D);  // [n, D]
  MlaAttend(qc, lw.attn, layer, q, c.has_indexer ? topk.data() : nullptr, out);
  MX_RETURN_IF_ERROR(AllReduce(ctx, shard, out, n * D));
  float* m = Grow(buf.m, n * D);  // [n, D]
  ForRows(ctx.pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * D; i < r1 * D; ++i) h[i] += out[i];
    for (int64_t r = r0; r < r1; ++r) {
      ctx.kt.rms_norm(h + r * D, lw.post_attention_layernorm.data(), eps, D, m + r * D);
    }
  });
  if (lw.is_moe) {
    MoeBlock(ctx, lw.moe, m, n, out, trace);
  } else {
    OpTimer t(ctx.opts.profile, Op::kDenseMlp);
    SwiGluMlp(ctx.kt, ctx.pool, lw.mlp, m, n, out);
  }
  MX_RETURN_IF_ERROR(AllReduce(ctx, shard, out, n * D));
  ForRows(ctx.pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * D; i < r1 * D; ++i) h[i] += out[i];
  });
  return CheckFinite(ctx.pool, h, n, D, fmt::format("the hidden state after layer {}", layer));
}

}  // namespace

Result<ForwardOutput> Model::Forward(const ForwardBatch& batch, const ForwardOptions& opts,
                                     KvStore& kv, const KernelTable& kt, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t D = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  const float eps = static_cast<float>(c.rms_norm_eps);
  ForwardOutput out;
  LayerContext ctx{c, kt, pool, kv, opts, {}, {}, {}, {}};
  std::set<int64_t> seen;
  bool any_mtp = false;
  out.row_begin.push_back(0);
  for (const SequenceInput& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) return InvalidArgument("sequence {} has no new tokens", s.seq);
    if (!seen.insert(s.seq).second) return InvalidArgument("sequence {} appears twice", s.seq);
    if (s.start_pos < 0) return InvalidArgument("sequence {}: negative start_pos", s.seq);
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= V) return InvalidArgument("token id {} is outside [0, {})", t, V);
    }
    if (!s.mtp_next.empty()) {
      if (!weights_.has_mtp) return InvalidArgument("MTP requested but the model has no MTP layer");
      if (s.mtp_next.size() != s.tokens.size()) {
        return InvalidArgument("sequence {}: {} mtp_next ids for {} tokens", s.seq,
                               s.mtp_next.size(), n);
      }
      for (int32_t t : s.mtp_next) {
        if (t < 0 || t >= V) return InvalidArgument("mtp_next id {} is outside [0, {})", t, V);
      }
      any_mtp = true;
    }
    MX_RETURN_IF_ERROR(kv.Reserve(s.seq, s.start_pos + n));
    const int64_t begin = ctx.rows();
    for (int64_t i = 0; i < n; ++i) ctx.pos.push_back(s.start_pos + i);
    ctx.groups.push_back({s.seq, begin, ctx.rows()});
    out.row_begin.push_back(ctx.rows());
  }
  const int64_t T = ctx.rows();
  FillRopeTables(ctx);

  if (opts.profile != nullptr) opts.profile->Begin();
  // [T, D] residual stream: this thread's, kept across forwards (not zeroed and faulted in anew)
  static thread_local std::vector<float> h_buf;
  float* h = Grow(h_buf, T * D);
  auto residual = [&] { return std::vector<float>(h, h + T * D); };  // hidden_states
  {
    OpTimer t(opts.profile, Op::kEmbed);
    std::vector<int32_t> ids;
    for (const SequenceInput& s : batch.seqs)
      ids.insert(ids.end(), s.tokens.begin(), s.tokens.end());
    ForRows(pool, T, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) weights_.Embed(ids[r], h + r * D);
    });
  }
  if (opts.want_hidden_states) out.hidden_states.push_back(residual());
  if (opts.logits == LogitsMode::kAll) {
    for (int64_t r = 0; r < T; ++r) out.logit_rows.push_back(r);
  } else if (opts.logits == LogitsMode::kLast) {
    for (size_t s = 0; s + 1 < out.row_begin.size(); ++s) {
      const int64_t first = batch.seqs[s].all_logits ? out.row_begin[s] : out.row_begin[s + 1] - 1;
      for (int64_t r = first; r < out.row_begin[s + 1]; ++r) out.logit_rows.push_back(r);
    }
  }
  // Pruned: the last layer carries only the logit rows past its attention (h then holds them).
  const bool prune = opts.prune_last_layer && opts.logits == LogitsMode::kLast && !any_mtp &&
                     !opts.want_hidden_states && !opts.want_router && !opts.want_topk && L > 0;
  std::vector<int32_t> topk;  // [T, K]
  bool have_topk = false;
  for (int64_t l = 0; l < L; ++l) {
    RouterChoice* trace = nullptr;
    if (opts.want_router && weights_.layers[l].is_moe) trace = &out.router[l];
    MX_RETURN_IF_ERROR(DecoderLayer(ctx, weights_.shard, weights_.layers[l], l, h, topk, have_topk,
                                    trace, /*reuse_topk=*/false,
                                    prune && l == L - 1 ? &out.logit_rows : nullptr));
    if (opts.want_hidden_states) out.hidden_states.push_back(residual());
    if (opts.want_topk) out.topk.push_back(c.has_indexer ? topk : std::vector<int32_t>());
  }

  if (!prune) {
    out.final_hidden.resize(T * D);  // [T, D]
    ForRows(pool, T, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        kt.rms_norm(h + r * D, weights_.norm.data(), eps, D, out.final_hidden.data() + r * D);
      }
    });
  }
  if (!out.logit_rows.empty()) {
    const int64_t n = static_cast<int64_t>(out.logit_rows.size());
    std::vector<float> y(n * D);  // [n, D]
    for (int64_t i = 0; i < n; ++i) {
      if (prune) {  // h's first n rows are the logit rows
        kt.rms_norm(h + i * D, weights_.norm.data(), eps, D, y.data() + i * D);
      } else {
        std::copy_n(out.final_hidden.data() + out.logit_rows[i] * D, D, y.data() + i * D);
      }
    }
    OpTimer t(opts.profile, Op::kLmHead);
    MX_RETURN_IF_ERROR(LmHead(ctx, y.data(), n, out.logits));
    MX_RETURN_IF_ERROR(CheckFinite(pool, out.logits.data(), n, V, "the logits"));
  }
  if (opts.profile != nullptr) opts.profile->End();
  if (!any_mtp) return out;
  OpTimer tm(opts.profile, Op::kMtp);

  // §3.11 MTP: rows of the sequences that asked for it, at the same positions.
  LayerContext mctx{c, kt, pool, kv, opts, {}, {}, {}, {}};
  std::vector<int32_t> next;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const SequenceInput& in = batch.seqs[s];
    if (in.mtp_next.empty()) continue;
    const int64_t begin = mctx.rows();
    for (int64_t r = out.row_begin[s]; r < out.row_begin[s + 1]; ++r) {
      out.mtp_rows.push_back(r);
      mctx.pos.push_back(ctx.pos[r]);
    }
    next.insert(next.end(), in.mtp_next.begin(), in.mtp_next.end());
    mctx.groups.push_back({in.seq, begin, mctx.rows()});
  }
  FillRopeTables(mctx);
  std::vector<const float*> hin;
  for (int64_t r : out.mtp_rows) hin.push_back(out.final_hidden.data() + r * D);
  std::vector<int32_t> mtp_topk;
  MX_RETURN_IF_ERROR(MtpLayer(mctx, next, hin, mtp_topk, /*reuse_topk=*/false,
                              opts.want_router ? &out.mtp_router : nullptr, out.mtp_hidden,
                              out.mtp_logits));
  if (opts.want_topk) out.mtp_topk = std::move(mtp_topk);
  return out;
}

Status Model::MtpLayer(const LayerContext& ctx, const std::vector<int32_t>& next,
                       const std::vector<const float*>& h, std::vector<int32_t>& topk,
                       bool reuse_topk, RouterChoice* trace, std::vector<float>& hidden,
                       std::vector<float>& logits, const std::vector<int64_t>* logit_rows) const {
  const ModelConfig& c = config_;
  const int64_t D = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const MtpWeights& mw = weights_.mtp;
  const int64_t R = ctx.rows();
  std::vector<float> eh(R * 2 * D);  // [R, 2D]: enorm(embed(next)) | hnorm(h)
  std::vector<float> tmp(D);
  for (int64_t i = 0; i < R; ++i) {
    weights_.Embed(next[i], tmp.data());
    ctx.kt.rms_norm(tmp.data(), mw.enorm.data(), eps, D, eh.data() + i * 2 * D);
    ctx.kt.rms_norm(h[i], mw.hnorm.data(), eps, D, eh.data() + i * 2 * D + D);
  }
  std::vector<float> u(R * D);  // [R, D]
  Linear(ctx.kt, ctx.pool, eh.data(), R, mw.eh_proj, u.data());
  bool have = reuse_topk;
  MX_RETURN_IF_ERROR(
      DecoderLayer(ctx, weights_.shard, mw.layer, L, u.data(), topk, have, trace, reuse_topk));
  hidden.resize(R * D);
  for (int64_t i = 0; i < R; ++i) {
    ctx.kt.rms_norm(u.data() + i * D, mw.shared_head_norm.data(), eps, D, hidden.data() + i * D);
  }
  if (logit_rows == nullptr) {
    MX_RETURN_IF_ERROR(LmHead(ctx, hidden.data(), R, logits));
    return CheckFinite(ctx.pool, logits.data(), R, V, "the MTP logits");
  }
  const auto n = static_cast<int64_t>(logit_rows->size());
  std::vector<float> y(n * D);  // [n, D]
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(hidden.data() + (*logit_rows)[i] * D, D, y.data() + i * D);
  }
  MX_RETURN_IF_ERROR(LmHead(ctx, y.data(), n, logits));
  return CheckFinite(ctx.pool, logits.data(), n, V, "the MTP logits");
}

Status Model::LmHead(const LayerContext& ctx, const float* x, int64_t n,
                     std::vector<float>& logits) const {
  const int64_t V = config_.vocab_size;
  const ModelShard& shard = weights_.shard;
  logits.resize(n * V);
  if (shard.whole()) {
    Linear(ctx.kt, ctx.pool, x, n, weights_.lm_head, logits.data());
    return Status::Ok();
  }
  // Each rank's rows of the vocabulary, padded to one block, then gathered and interleaved.
  const int64_t vb = shard.VocabBlock(V), mine = weights_.lm_head.n;
  std::vector<float> local(n * mine), block(n * vb, 0.0f), all(shard.size * n * vb);
  Linear(ctx.kt, ctx.pool, x, n, weights_.lm_head, local.data());
  for (int64_t i = 0; i < n; ++i) std::copy_n(local.data() + i * mine, mine, block.data() + i * vb);
  MX_RETURN_IF_ERROR(
      Group(ctx, shard).AllGather(std::span<const float>(block), std::span<float>(all)));
  for (int r = 0; r < shard.size; ++r) {
    const int64_t v0 = r * vb, cnt = std::min(V, v0 + vb) - v0;
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(all.data() + (r * n + i) * vb, cnt, logits.data() + i * V + v0);
    }
  }
  return Status::Ok();
}

Result<MtpOutput> Model::ForwardMtp(const MtpBatch& batch, KvStore& kv, const KernelTable& kt,
                                    ThreadPool& pool, const MoeKernelConfig& moe,
                                    Communicator* comm) const {
  const ModelConfig& c = config_;
  const int64_t D = c.hidden_size, V = c.vocab_size, K = c.index_topk;
  if (!weights_.has_mtp) return InvalidArgument("MTP requested but the model has no MTP layer");
  ForwardOptions opts;
  opts.moe = moe;
  opts.comm = comm;
  LayerContext ctx{c, kt, pool, kv, opts, {}, {}, {}, {}};
  MtpOutput out;
  out.row_begin.push_back(0);
  std::set<int64_t> seen;
  std::vector<int32_t> next, topk;
  std::vector<const float*> h;
  int64_t with_topk = 0;
  for (const MtpSequenceInput& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) return InvalidArgument("MTP sequence {} has no rows", s.seq);
    if (!seen.insert(s.seq).second) return InvalidArgument("MTP sequence {} appears twice", s.seq);
    if (s.start_pos < 0) return InvalidArgument("MTP sequence {}: negative start_pos", s.seq);
    if (static_cast<int64_t>(s.hidden.size()) != n * D) {
      return InvalidArgument("MTP sequence {}: {} hidden values for {} rows of {}", s.seq,
                             s.hidden.size(), n, D);
    }
    if (!s.topk.empty() && (!c.has_indexer || static_cast<int64_t>(s.topk.size()) != n * K)) {
      return InvalidArgument("MTP sequence {}: {} top-k entries for {} rows of {}", s.seq,
                             s.topk.size(), n, c.has_indexer ? K : 0);
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= V) return InvalidArgument("token id {} is outside [0, {})", t, V);
    }
    MX_RETURN_IF_ERROR(kv.Reserve(s.seq, s.start_pos + n));
    const int64_t begin = ctx.rows();
    for (int64_t i = 0; i < n; ++i) {
      ctx.pos.push_back(s.start_pos + i);
      h.push_back(s.hidden.data() + i * D);
    }
    ctx.groups.push_back({s.seq, begin, ctx.rows()});
    out.row_begin.push_back(ctx.rows());
    next.insert(next.end(), s.tokens.begin(), s.tokens.end());
    topk.insert(topk.end(), s.topk.begin(), s.topk.end());
    with_topk += s.topk.empty() ? 0 : 1;
  }
  if (with_topk != 0 && with_topk != static_cast<int64_t>(batch.seqs.size())) {
    return InvalidArgument("MTP batch: either every sequence gives its top-k or none does");
  }
  FillRopeTables(ctx);
  std::vector<int64_t> last_rows;  // with last_logits: each sequence's last row
  for (size_t s = 1; batch.last_logits && s < out.row_begin.size(); ++s) {
    last_rows.push_back(out.row_begin[s] - 1);
  }
  MX_RETURN_IF_ERROR(MtpLayer(ctx, next, h, topk, /*reuse_topk=*/with_topk > 0, nullptr, out.hidden,
                              out.logits, batch.last_logits ? &last_rows : nullptr));
  out.topk = std::move(topk);
  return out;
}

}  // namespace mx
