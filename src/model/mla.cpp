// MLA attention, expanded and absorbed forms (see mla.h).
#include "model/mla.h"

#include <vector>

#include "base/check.h"

namespace mx {

namespace {

// The key positions row r attends to: its top-k set, or every t <= pos.
std::vector<int64_t> Selection(const LayerContext& ctx, const int32_t* topk, int64_t r) {
  std::vector<int64_t> sel;
  const int64_t p = ctx.pos[r];
  if (topk == nullptr || ctx.opts.dense_attention) {
    for (int64_t t = 0; t <= p; ++t) sel.push_back(t);
    return sel;
  }
  const int32_t* row = topk + r * ctx.c.index_topk;
  for (int64_t i = 0; i < ctx.c.index_topk; ++i) {
    if (row[i] < 0) continue;
    MX_CHECK_LE(row[i], p);
    sel.push_back(row[i]);
  }
  return sel;
}

// The kernels for the products with kv_b_proj. note: they take their activations exactly
// (GemmActivations::kFp32) whatever the rest of the forward does: the expanded and absorbed
// forms round different operands (the cached latent vs q_nope and the attention output), so
// with bf16 activations they would disagree by ~1e-3 and a token's output would depend on
// which form its chunk took, i.e. on how the scheduler chunked and batched it.
const KernelTable& KvBKernels(const LayerContext& ctx) {
  return WithGemmActivations(ctx.kt, GemmActivations::kFp32);
}

bool UseAbsorbed(const LayerContext& ctx, const RowGroup& g) {
  switch (ctx.opts.mla_form) {
    case MlaForm::kExpanded:
      return false;
    case MlaForm::kAbsorbed:
      return true;
    case MlaForm::kAuto:
      break;
  }
  // note: the expanded form decompresses every attended cache row through kv_b
  // (kv_lora_rank·H·(Dn+Dv) per row) once for all queries; the absorbed one costs about
  // H·(2·kv_lora_rank + Dr) per query and row. Few queries (decode, speculative verify) are
  // cheaper absorbed; take it while under half the crossover.
  const ModelConfig& c = ctx.c;
  const int64_t expanded = c.kv_lora_rank * (c.qk_nope_head_dim + c.v_head_dim);
  const int64_t absorbed = 2 * c.kv_lora_rank + c.qk_rope_head_dim;
  return (g.end - g.begin) * absorbed * 2 <= expanded;
}

// Expanded form (§3.4) for the rows of one sequence; writes o [rows, H·Dv].
void AttendExpanded(const LayerContext& ctx, const AttentionWeights& w, int64_t layer,
                    const RowGroup& g, const float* q, const int32_t* topk, float* o) {
  const ModelConfig& c = ctx.c;
  const int64_t H = w.heads, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim, Dv = c.v_head_dim,
                Rkv = c.kv_lora_rank, Dq = Dn + Dr, Dkv = Dn + Dv;
  const int64_t S = ctx.pos[g.end - 1] + 1;  // cached keys needed by this group
  std::vector<float> lat(S * Rkv);           // [S, Rkv]
  std::vector<float> kpe_rows(S * Dr);       // [S, Dr]
  std::vector<const float*> kpe(S);          // [S] → [Dr]
  std::vector<float> row(Rkv + Dr);
  for (int64_t t = 0; t < S; ++t) {
    ctx.kv.ReadMlaRow(g.seq, layer, t, row.data());
    std::copy(row.begin(), row.begin() + Rkv, lat.data() + t * Rkv);
    std::copy(row.begin() + Rkv, row.end(), kpe_rows.data() + t * Dr);
    kpe[t] = kpe_rows.data() + t * Dr;
  }
  std::vector<float> kvb(S * H * Dkv);  // [S, H, Dn+Dv]: k_nope | v per head
  Linear(KvBKernels(ctx), ctx.pool, lat.data(), S, w.kv_b_proj, kvb.data());
  const float scale = static_cast<float>(c.softmax_scale());
  std::vector<float> s;
  std::vector<const float*> kn, kr, v;
  for (int64_t r = g.begin; r < g.end; ++r) {
    const std::vector<int64_t> sel = Selection(ctx, topk, r);
    const int64_t n = static_cast<int64_t>(sel.size());
    s.resize(n);
    kn.resize(n);
    kr.resize(n);
    v.resize(n);
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (r * H + h) * Dq;  // [Dn | Dr]
      for (int64_t i = 0; i < n; ++i) {
        kn[i] = kvb.data() + (sel[i] * H + h) * Dkv;
        kr[i] = kpe[sel[i]];
        v[i] = kn[i] + Dn;
      }
      ctx.kt.attend(qh, qh + Dn, Dn, Dr, kn.data(), kr.data(), v.data(), Dv, n, scale, s.data(),
                    o + ((r - g.begin) * H + h) * Dv);
    }
  }
}

// Absorbed form (§3.5) for the rows of one sequence; writes o [rows, H·Dv].
// note: W_UK[h]ᵀ·q_nope is a transposed product the kernel table has no entry for yet; it is a
// plain loop here (a decode-speed kernel will want W_UK pre-transposed).
void AttendAbsorbed(const LayerContext& ctx, const AttentionWeights& w, int64_t layer,
                    const RowGroup& g, const float* q, const int32_t* topk, float* o) {
  const ModelConfig& c = ctx.c;
  const int64_t H = w.heads, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim, Dv = c.v_head_dim,
                Rkv = c.kv_lora_rank, Dq = Dn + Dr, Dkv = Dn + Dv;
  const int64_t m = g.end - g.begin;
  const float scale = static_cast<float>(c.softmax_scale());
  // q_lat[h] [m, Rkv] = q_nope[h] [m, Dn] · W_UK[h], one GEMM per head over the group's rows.
  std::vector<float> qn(m * Dn), q_lat(H * m * Rkv), o_lat(H * m * Rkv), s;
  std::vector<const float*> lat, pe;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(q + ((g.begin + i) * H + h) * Dq, Dn, qn.data() + i * Dn);
    }
    Linear(KvBKernels(ctx), ctx.pool, qn.data(), m, w.kv_b_uk_t.Rows(h * Rkv, Rkv),
           q_lat.data() + h * m * Rkv);
  }
  for (int64_t r = g.begin; r < g.end; ++r) {
    const int64_t i = r - g.begin;
    const std::vector<int64_t> sel = Selection(ctx, topk, r);
    std::vector<float> row_data(sel.size() * (Rkv + Dr));  // [sel, Rkv+Dr]
    for (size_t t = 0; t < sel.size(); ++t) {
      ctx.kv.ReadMlaRow(g.seq, layer, sel[t], row_data.data() + t * (Rkv + Dr));
    }
    const int64_t n = static_cast<int64_t>(sel.size());
    s.resize(n);
    lat.resize(n);
    pe.resize(n);
    for (int64_t t = 0; t < n; ++t) {  // keys [latent | k_pe], values the latent
      lat[t] = row_data.data() + t * (Rkv + Dr);
      pe[t] = lat[t] + Rkv;
    }
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (r * H + h) * Dq;
      const float* ql = q_lat.data() + (h * m + i) * Rkv;
      ctx.kt.attend(ql, qh + Dn, Rkv, Dr, lat.data(), pe.data(), lat.data(), Rkv, n, scale,
                    s.data(), o_lat.data() + (h * m + i) * Rkv);
    }
  }
  // o[h] [m, Dv] = o_lat[h] · W_UVᵀ, one GEMM per head.
  std::vector<float> oh(m * Dv);
  for (int64_t h = 0; h < H; ++h) {
    Linear(KvBKernels(ctx), ctx.pool, o_lat.data() + h * m * Rkv, m,
           w.kv_b_proj.Rows(h * Dkv + Dn, Dv), oh.data());
    for (int64_t i = 0; i < m; ++i) std::copy_n(oh.data() + i * Dv, Dv, o + (i * H + h) * Dv);
  }
}

}  // namespace

void MlaProject(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* a,
                float* cq, float* q) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), H = w.heads, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim,
                Rq = c.q_lora_rank, Rkv = c.kv_lora_rank, Dq = Dn + Dr;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Linear(ctx.kt, ctx.pool, a, T, w.q_a_proj, cq);  // [T, Rq]
  for (int64_t r = 0; r < T; ++r) {
    ctx.kt.rms_norm(cq + r * Rq, w.q_a_layernorm.data(), eps, Rq, cq + r * Rq);
  }
  Linear(ctx.kt, ctx.pool, cq, T, w.q_b_proj, q);  // [T, H, Dn+Dr]
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t h = 0; h < H; ++h) {  // note: the rope slice is the LAST Dr of each head
      ctx.kt.rope(q + (r * H + h) * Dq + Dn, Dr, ctx.cos(r), ctx.sin(r), c.rope_interleave);
    }
  }
  std::vector<float> kv(T * (Rkv + Dr));  // [T, Rkv+Dr]
  Linear(ctx.kt, ctx.pool, a, T, w.kv_a_proj_with_mqa, kv.data());
  std::vector<float> row(Rkv + Dr);  // [latent c | k_pe]
  for (const RowGroup& g : ctx.groups) {
    for (int64_t r = g.begin; r < g.end; ++r) {
      const float* src = kv.data() + r * (Rkv + Dr);
      ctx.kt.rms_norm(src, w.kv_a_layernorm.data(), eps, Rkv, row.data());
      std::copy(src + Rkv, src + Rkv + Dr, row.data() + Rkv);
      ctx.kt.rope(row.data() + Rkv, Dr, ctx.cos(r), ctx.sin(r), c.rope_interleave);
      ctx.kv.WriteMlaRow(g.seq, layer, ctx.pos[r], row.data());
    }
  }
}

void MlaAttend(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* q,
               const int32_t* topk, float* out) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), H = w.heads, Dv = c.v_head_dim;
  std::vector<float> o(T * H * Dv, std::numeric_limits<float>::quiet_NaN());  // [T, H·Dv]
  for (const RowGroup& g : ctx.groups) {
    float* og = o.data() + g.begin * H * Dv;
    if (UseAbsorbed(ctx, g)) {
      AttendAbsorbed(ctx, w, layer, g, q, topk, og);
    } else {
      AttendExpanded(ctx, w, layer, g, q, topk, og);
    }
  }
  Linear(ctx.kt, ctx.pool, o.data(), T, w.o_proj, out);  // [T, D]
}

}  // namespace mx
