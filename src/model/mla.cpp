// MLA attention, expanded and absorbed forms (see mla.h).
//
// Per sequence the query rows split in two: the rows whose context fits in index_topk (or all,
// under dense attention) attend every earlier position, the rest only their DSA top-k set.
// Positions ascend, so the dense rows lead. Each sequence takes the cheapest (FormCost, in
// multiply-adds) of three plans:
//   all expanded:  every position up to the last row decompressed through kv_b once for all
//                  the rows, then MHA (192 + 64 + 128 per key and head) over each row's
//                  prefix, a sparse row masked to its top-k set;
//   all absorbed:  each query moved into latent space, MQA (512 + 64 + 512 per key and head)
//                  over only the keys it attends, reading only those rows;
//   dense rows expanded, sparse rows absorbed.
// A long prompt in one pass is expanded (its prefix is attended by many rows); a small chunk
// after a long cached context (decode, chunked prefill) is absorbed, so chunked prefill no
// longer decompresses the whole cache per chunk. Decode is always absorbed (one query).
// The inner loops are the attend_rows kernel over row-pointer arrays, split over the pool by
// (query tile, head) or (query, head block); buffers come from a per-thread scratch that grows
// to the largest call (nothing is allocated per call after warm-up).
#include "model/mla.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

#include "base/check.h"
#include "base/scratch.h"

namespace mx {

namespace {

// Queries per expanded task (one head's rows over a shared causal prefix): each key row is
// read once per task, so the tile sets the expanded form's bytes per multiply-add. 64: the
// attention of a real-width 2,048-token prefill 0.87x its time at 32 (model_bench, 2026-12-07).
constexpr int64_t kQueryTile = 64;

// Absorbed attention's unit of work: keys [k0, k0 + n) of a query's attended keys; `parts` is
// the query's count of such units (1: the whole key set).
struct KeyPart {
  int64_t query, k0, n, parts;
};

struct MlaScratch {
  std::vector<float> o;                // [T, H·Dv]
  std::vector<float> kv;               // [T, Rkv+Dr] MlaProject
  std::vector<float> rows;             // [U, Rkv+Dr] read cache rows
  std::vector<float> lat;              // [U, Rkv] expanded: the latents to decompress
  std::vector<float> kvb;              // [U, H, Dn+Dv] expanded: decompressed rows
  std::vector<float> qn;               // PerHeadGemm's MXFP4 staging
  std::vector<float> q_lat;            // [H, m, Rkv]
  std::vector<float> o_lat;            // [H, m, Rkv]
  std::vector<float> oh;               // PerHeadGemm's MXFP4 staging
  std::vector<int32_t> slot;           // [S] position → row in `rows`, −1 when not read
  std::vector<uint64_t> mask;          // [m, U/64] expanded: the sparse rows' selections
  std::vector<int64_t> read;           // [U] positions read
  std::vector<const float*> ptr;       // shared key pointers (absorbed dense: lat / pe)
  std::vector<const uint16_t*> ptr16;  // the same into a bf16 cache, in place
  std::vector<int64_t> dense;          // [S] positions 0..S−1
  // Per worker: kernel scratch, three pointer arrays and the rows' limits.
  std::vector<float> w_scratch;
  std::vector<const float*> w_ptr;
  std::vector<int64_t> w_lim;
  std::vector<const uint16_t*> w_ptr16;  // per worker: index_topk key pointers into the cache
  std::vector<int64_t> w_pos;            // per worker: index_topk selected positions
  // Absorbed: the units of work, and per unit of a query in several parts and head, the part's
  // unnormalized output [Rkv] and its max and denominator.
  std::vector<KeyPart> units;
  std::vector<float> parts;
  std::vector<float> part_stats;
  std::vector<const float*> part_ptr;  // per unit its parts' rows, then its stats
};

MlaScratch& MlaBuffers() {
  static thread_local MlaScratch s;
  return s;
}

// The kernels for the products with kv_b_proj. note: they take their activations exactly
// (GemmActivations::kFp32) whatever the rest of the forward does: the expanded and absorbed
// forms round different operands (the cached latent vs q_nope and the attention output), so
// with bf16 activations they would disagree by ~1e-3 and a token's output would depend on
// which form its chunk took, i.e. on how the scheduler chunked and batched it.
const KernelTable& KvBKernels(const LayerContext& ctx) {
  return WithGemmActivations(ctx.kt, GemmActivations::kFp32);
}

// The kernels for decompressing cached latents x [n] through kv_b_proj: when every latent is a
// bf16 value (a bf16 cache's are) the rounded-activation kernels compute exactly what the exact
// ones do (the split into bf16 parts has zero low parts; bf16_packed_test asserts the bits) at a
// third of the dot products.
const KernelTable& LatentKernels(const LayerContext& ctx, const float* x, int64_t n) {
  uint32_t low = 0;
  for (int64_t i = 0; i < n; ++i) low |= std::bit_cast<uint32_t>(x[i]) & 0xFFFFu;
  return low == 0 ? WithGemmActivations(ctx.kt, GemmActivations::kBf16) : KvBKernels(ctx);
}

bool IsSparse(const LayerContext& ctx, const int32_t* topk, int64_t r) {
  return topk != nullptr && !ctx.opts.dense_attention && ctx.pos[r] + 1 > ctx.c.index_topk;
}

// Calls fn(i) for every selected position of sparse row r, ascending.
template <typename Fn>
void ForSelected(const LayerContext& ctx, const int32_t* topk, int64_t r, Fn fn) {
  const int32_t* row = topk + r * ctx.c.index_topk;
  for (int64_t i = 0; i < ctx.c.index_topk; ++i) {
    if (row[i] < 0) continue;
    MX_CHECK_LE(row[i], ctx.pos[r]);
    fn(static_cast<int64_t>(row[i]));
  }
}

// Reads the cache rows that rows [r0, r1) attend into s.rows, with s.slot mapping position →
// row: every position up to the last row when `all` (or when no row is sparse), else positions
// 0..p of the dense rows and the union of the sparse rows' selections. Returns the count.
int64_t ReadAttendedRows(const LayerContext& ctx, int64_t seq, int64_t layer, int64_t r0,
                         int64_t r1, bool all, const int32_t* topk, MlaScratch& s) {
  const int64_t W = ctx.c.kv_lora_rank + ctx.c.qk_rope_head_dim, S = ctx.pos[r1 - 1] + 1;
  int32_t* slot = Grow(s.slot, S);
  int64_t* read = Grow(s.read, S);
  int64_t u = 0;
  if (all || !IsSparse(ctx, topk, r1 - 1)) {
    for (int64_t t = 0; t < S; ++t) slot[t] = static_cast<int32_t>(t), read[u++] = t;
  } else {
    std::fill(slot, slot + S, -1);
    for (int64_t r = r0; r < r1; ++r) {
      if (IsSparse(ctx, topk, r)) {
        ForSelected(ctx, topk, r, [&](int64_t t) { slot[t] = 0; });
      } else {
        std::fill(slot, slot + ctx.pos[r] + 1, 0);
      }
    }
    for (int64_t t = 0; t < S; ++t) {
      if (slot[t] == 0) slot[t] = static_cast<int32_t>(u), read[u++] = t;
    }
  }
  float* rows = Grow(s.rows, u * W);
  ctx.pool.parallel_for(0, u, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) ctx.kv.ReadMlaRow(seq, layer, read[i], rows + i * W);
  });
  return u;
}

// Multiply-adds of rows [r0, r1) attended in one form. Expanded: decompress every position up
// to the last row once, then MHA over each row's whole prefix (sparse rows mask theirs).
// Absorbed: q into latent and o out of it per row, MQA over the row's keys.
int64_t FormCost(const LayerContext& ctx, const int32_t* topk, int64_t heads, int64_t r0,
                 int64_t r1, bool absorbed) {
  if (r0 == r1) return 0;
  const ModelConfig& c = ctx.c;
  const int64_t Rkv = c.kv_lora_rank, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim,
                Dv = c.v_head_dim;
  int64_t prefix = 0, selected = 0;  // Σ (p + 1), Σ attended keys
  for (int64_t r = r0; r < r1; ++r) {
    prefix += ctx.pos[r] + 1;
    selected += IsSparse(ctx, topk, r) ? c.index_topk : ctx.pos[r] + 1;
  }
  if (absorbed) return heads * ((r1 - r0) * Rkv * (Dn + Dv) + selected * (2 * Rkv + Dr));
  return heads * ((ctx.pos[r1 - 1] + 1) * Rkv * (Dn + Dv) + prefix * (Dn + Dr + Dv));
}

// Worker buffers: kernel scratch for m rows of dv values, 3 pointer arrays of n, m limits.
struct WorkerBufs {
  float* scratch;
  const float** ka;
  const float** kb;
  const float** v;
  int64_t* lim;
};

WorkerBufs Worker(MlaScratch& s, int worker, int64_t m, int64_t n, int64_t dv) {
  const int64_t fs = AttendRowsScratch(m, dv);
  return {s.w_scratch.data() + worker * fs, s.w_ptr.data() + worker * 3 * n,
          s.w_ptr.data() + worker * 3 * n + n, s.w_ptr.data() + worker * 3 * n + 2 * n,
          s.w_lim.data() + worker * m};
}

void ReserveWorkers(MlaScratch& s, int workers, int64_t m, int64_t n, int64_t dv) {
  Grow(s.w_scratch, workers * AttendRowsScratch(m, dv));
  Grow(s.w_ptr, workers * 3 * n);
  Grow(s.w_lim, workers * m);
}

// y_h [m, n] (at y + h·y_head, row stride ldy) = x_h [m, k] (at x + h·x_head, row stride ldx) ·
// W_hᵀ for every head h, with the kernels of `kt`, W_h the n rows of `w` from w_first + h·w_head.
// For bf16 / fp32 / FP8 weights one pool call over the heads, each head's GEMM on one worker (a
// decode step makes 2 such calls per layer instead of 2·H threaded GEMMs); the kernel computes
// every element as the threaded GEMM does, so the results are the same bits. MXFP4: a threaded
// Linear per head through `tmp` (its kernel takes Q8 activations).
void PerHeadGemm(const LayerContext& ctx, const KernelTable& kt, const float* x, int64_t ldx,
                 int64_t x_head, int64_t m, const LinearWeight& w, int64_t w_first, int64_t w_head,
                 int64_t n, float* y, int64_t ldy, int64_t y_head, std::vector<float>& tmp) {
  OpTimer t(ctx.opts.profile, Op::kKvB);
  const int64_t H = (w.n - w_first - n) / w_head + 1, k = w.k;
  if (w.dtype != DType::kBF16 && w.dtype != DType::kF32 && w.dtype != DType::kF8_E4M3) {
    // Staged through tmp where x or y is not the contiguous [m, k] / [m, n] Linear takes.
    const bool direct_x = x_head == 0 && ldx == k, direct_y = ldy == n;
    float* xt = Grow(tmp, (direct_x ? 0 : m * k) + (direct_y ? 0 : m * n) + 1);
    float* yt = xt + (direct_x ? 0 : m * k);
    for (int64_t h = 0; h < H; ++h) {
      const float* xh = x;
      if (!direct_x) {
        for (int64_t i = 0; i < m; ++i) std::copy_n(x + h * x_head + i * ldx, k, xt + i * k);
        xh = xt;
      }
      float* yh = direct_y ? y + h * y_head : yt;
      Linear(kt, ctx.pool, xh, m, w.Rows(w_first + h * w_head, n), yh);
      if (!direct_y) {
        for (int64_t i = 0; i < m; ++i) std::copy_n(yt + i * n, n, y + h * y_head + i * ldy);
      }
    }
    return;
  }
  ctx.pool.parallel_for(0, H, [&](int64_t lo, int64_t hi, int) {
    for (int64_t h = lo; h < hi; ++h) {
      if (w.bf16p != nullptr) {
        const int64_t r0 = w_first + h * w_head;
        kt.gemm_bf16_packed(x + h * x_head, ldx, m, w.bf16p, k, r0, r0 + n, y + h * y_head, ldy,
                            {});
      } else if (w.dtype == DType::kBF16) {
        kt.gemm_bf16(x + h * x_head, ldx, w.bf16 + (w_first + h * w_head) * k, k, y + h * y_head,
                     ldy, m, n, k, {});
      } else if (w.dtype == DType::kF8_E4M3) {
        // The packed codes' rows r0.. of head h, x and y in place: one task per head instead of
        // a threaded Linear per head (64 pool dispatches of a 256-row GEMV each in decode).
        const int64_t r0 = w_first + h * w_head;
        kt.gemm_fp8(x + h * x_head, ldx, m, w.fp8p, w.fp8p_s, k, r0, r0 + n, y + h * y_head, ldy,
                    {});
      } else {
        kt.gemm_f32(x + h * x_head, ldx, w.f32 + (w_first + h * w_head) * k, k, y + h * y_head, ldy,
                    m, n, k, {});
      }
    }
  });
}

// Expanded form (§3.4) for rows [r0, r1) of group g; o [rows, H·Dv] holds row r0 first. Every
// position up to the last row is decompressed once; each (query tile, head) task is one
// attend_rows call over the tile's causal prefix, sparse rows masked to their top-k set.
void AttendExpanded(const LayerContext& ctx, const AttentionWeights& w, int64_t layer,
                    const RowGroup& g, int64_t r0, int64_t r1, const float* q, const int32_t* topk,
                    float* o) {
  const ModelConfig& c = ctx.c;
  const int64_t H = w.heads, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim, Dv = c.v_head_dim,
                Rkv = c.kv_lora_rank, Dq = Dn + Dr, Dkv = Dn + Dv, W = Rkv + Dr;
  MlaScratch& s = MlaBuffers();
  const int64_t U = ReadAttendedRows(ctx, g.seq, layer, r0, r1, /*all=*/true, topk, s);
  float* lat = Grow(s.lat, U * Rkv);  // [U, Rkv]
  for (int64_t i = 0; i < U; ++i) std::copy_n(s.rows.data() + i * W, Rkv, lat + i * Rkv);
  // [H, U, Dn+Dv]: k_nope | v per head, each head's rows contiguous (a task streams one head's
  // rows: consecutive addresses, not one page per row).
  float* kvb = Grow(s.kvb, U * H * Dkv);
  PerHeadGemm(ctx, LatentKernels(ctx, lat, U * Rkv), lat, Rkv, 0, U, w.kv_b_proj, 0, Dkv, Dkv, kvb,
              Dkv, U * Dkv, s.qn);
  const float scale = static_cast<float>(c.softmax_scale());
  const float* rows = s.rows.data();
  const int64_t m = r1 - r0;
  // Sparse rows' masks [m, ldm]: bit t set when the row attends position t (dense rows: all).
  const bool any_sparse = IsSparse(ctx, topk, r1 - 1);
  const int64_t ldm = (U + 63) / 64;
  uint64_t* mask = any_sparse ? Grow(s.mask, m * ldm) : nullptr;
  for (int64_t i = 0; any_sparse && i < m; ++i) {
    uint64_t* mi = mask + i * ldm;
    const bool sparse = IsSparse(ctx, topk, r0 + i);
    std::fill(mi, mi + ldm, sparse ? 0 : ~uint64_t{0});
    if (sparse)
      ForSelected(ctx, topk, r0 + i, [&](int64_t t) { mi[t / 64] |= uint64_t{1} << (t % 64); });
  }
  // Tasks (head, query tile), a head's tiles in a row so that its decompressed rows are read
  // from memory about once and then from the last-level cache by the tiles after (tile-major
  // order streamed every head's rows from memory for every tile: at GLM-5.2's 64 heads and 2,048
  // positions, 201 MB per pass), tiles in zig-zag order (early tiles attend fewer keys), taken
  // one at a time by whichever thread is free.
  const int64_t n_tiles = (m + kQueryTile - 1) / kQueryTile;
  ReserveWorkers(s, ctx.pool.size(), kQueryTile, U, Dv);
  ctx.pool.parallel_for_dynamic(0, n_tiles * H, 1, [&](int64_t lo, int64_t hi, int worker) {
    const WorkerBufs b = Worker(s, worker, kQueryTile, U, Dv);
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t z = task % n_tiles, h = task / n_tiles;
      const int64_t tile = z % 2 == 0 ? z / 2 : n_tiles - 1 - z / 2;
      const int64_t i0 = tile * kQueryTile, i1 = std::min(m, i0 + kQueryTile);
      const int64_t n = ctx.pos[r0 + i1 - 1] + 1;
      for (int64_t t = 0; t < n; ++t) {
        b.ka[t] = kvb + (h * U + t) * Dkv;
        b.kb[t] = rows + t * W + Rkv;
        b.v[t] = b.ka[t] + Dn;
      }
      for (int64_t i = i0; i < i1; ++i) b.lim[i - i0] = ctx.pos[r0 + i] + 1;
      const float* qh = q + ((r0 + i0) * H + h) * Dq;
      ctx.kt.attend_rows(qh, H * Dq, qh + Dn, H * Dq, i1 - i0, Dn, Dr, b.ka, b.kb, b.v, Dv, n,
                         b.lim, mask == nullptr ? nullptr : mask + i0 * ldm, ldm, scale, b.scratch,
                         o + (i0 * H + h) * Dv, H * Dv, nullptr);
    }
  });
}

// Absorbed form (§3.5) for rows [r0, r1) of group g; o [rows, H·Dv] holds row r0 first. Only
// the attended rows are read; each (query, head block) task is one attend_rows call (MQA: the
// heads share the query's keys).
void AttendAbsorbed(const LayerContext& ctx, const AttentionWeights& w, int64_t layer,
                    const RowGroup& g, int64_t r0, int64_t r1, const float* q, const int32_t* topk,
                    float* o) {
  const ModelConfig& c = ctx.c;
  const int64_t H = w.heads, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim, Dv = c.v_head_dim,
                Rkv = c.kv_lora_rank, Dq = Dn + Dr, Dkv = Dn + Dv, W = Rkv + Dr;
  MlaScratch& s = MlaBuffers();
  const int64_t m = r1 - r0;
  const float scale = static_cast<float>(c.softmax_scale());
  // q_lat[h] [m, Rkv] = q_nope[h] [m, Dn] · W_UK[h], one GEMM per head over the rows.
  float* q_lat = Grow(s.q_lat, H * m * Rkv);
  float* o_lat = Grow(s.o_lat, H * m * Rkv);
  PerHeadGemm(ctx, KvBKernels(ctx), q + r0 * H * Dq, H * Dq, Dq, m, w.kv_b_uk_t, 0, Rkv, Rkv, q_lat,
              Rkv, m * Rkv, s.qn);
  // Keys [latent | k_pe], values the latent. A store of bf16 rows is attended in place
  // (attend_rows_bf16: the bits of attend_rows over the widened rows, without widening them);
  // otherwise the attended rows are read into s.rows first.
  int64_t S = 0;  // dense rows attend positions 0..p, all below S
  for (int64_t r = r0; r < r1; ++r) {
    if (!IsSparse(ctx, topk, r)) S = std::max(S, ctx.pos[r] + 1);
  }
  int64_t* dense = Grow(s.dense, std::max<int64_t>(S, 1));
  for (int64_t t = 0; t < S; ++t) dense[t] = t;
  const uint16_t** shared16 = Grow(s.ptr16, 2 * std::max<int64_t>(S, 1));
  const bool in_place = ctx.kv.MlaRowsBf16(g.seq, layer, {dense, static_cast<size_t>(S)}, shared16);
  const float** shared = nullptr;
  const float* rows = nullptr;
  const int32_t* slot = nullptr;
  if (in_place) {
    for (int64_t t = 0; t < S; ++t) shared16[S + t] = shared16[t] + Rkv;
  } else {
    const int64_t U = ReadAttendedRows(ctx, g.seq, layer, r0, r1, /*all=*/false, topk, s);
    rows = s.rows.data();
    slot = s.slot.data();
    // A dense row attends positions 0..p, which are rows 0..p (every position before the last
    // dense row was read, in order): shared pointers.
    shared = Grow(s.ptr, 2 * U);
    for (int64_t t = 0; t < U; ++t) {
      shared[t] = rows + t * W;
      shared[U + t] = shared[t] + Rkv;
    }
    S = U;
  }
  // Tasks (query, key part, head block), queries in zig-zag order. Fewer queries than workers
  // split their keys into parts of kAttendSegment, folded by attend_combine into the bits of one
  // call (a query's output does not depend on how it was batched), so each worker reads only
  // its part of the attended rows; then, if there are still fewer parts than workers, the heads.
  // A query of more than its share of kPartsPerWorker · workers parts (dense attention over a
  // long context) stays whole: the parts' rows [parts, H, Rkv] stay a few MB.
  constexpr int64_t kPartsPerWorker = 4;
  const int64_t workers = ctx.pool.size();
  const int64_t K = c.index_topk;
  const bool split = m < workers;
  const int64_t max_parts = kPartsPerWorker * workers / std::max<int64_t>(m, 1);
  s.units.clear();
  bool parted_any = false;  // some query in several parts: buffers and a combining pass
  for (int64_t z = 0; z < m; ++z) {
    const int64_t i = z % 2 == 0 ? z / 2 : m - 1 - z / 2;  // zig-zag: dense rows grow in cost
    int64_t n = 0;
    if (IsSparse(ctx, topk, r0 + i)) {
      ForSelected(ctx, topk, r0 + i, [&](int64_t) { ++n; });
    } else {
      n = ctx.pos[r0 + i] + 1;
    }
    MX_CHECK_GT(n, 0);
    const bool parted = split && (n + kAttendSegment - 1) / kAttendSegment <= max_parts;
    const int64_t step = parted ? kAttendSegment : n, parts = (n + step - 1) / step;
    parted_any = parted_any || parts > 1;
    for (int64_t k0 = 0; k0 < n; k0 += step)
      s.units.push_back({i, k0, std::min(step, n - k0), parts});
  }
  const auto n_units = static_cast<int64_t>(s.units.size());
  const int64_t n_blocks =
      n_units >= workers
          ? 1
          : std::min<int64_t>(H, (workers + n_units - 1) / std::max<int64_t>(n_units, 1));
  const int64_t hb = (H + n_blocks - 1) / n_blocks;
  // A query in one part is written straight into o_lat, parts into s.parts first.
  float* parts = parted_any ? Grow(s.parts, n_units * H * Rkv) : nullptr;
  float* part_stats = parted_any ? Grow(s.part_stats, n_units * H * 2) : nullptr;
  ReserveWorkers(s, ctx.pool.size(), hb, K, Rkv);
  Grow(s.w_ptr16, workers * 2 * K);
  Grow(s.w_pos, workers * K);
  ctx.pool.parallel_for_dynamic(0, n_units * n_blocks, 1, [&](int64_t lo, int64_t hi, int worker) {
    const WorkerBufs b = Worker(s, worker, hb, K, Rkv);
    const uint16_t** ka16 = s.w_ptr16.data() + worker * 2 * K;
    int64_t* sel = s.w_pos.data() + worker * K;
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t u = task / n_blocks, h0 = (task % n_blocks) * hb, h1 = std::min(H, h0 + hb);
      const KeyPart& part = s.units[u];
      const int64_t i = part.query, k0 = part.k0, n = part.n;
      if (h0 >= h1) continue;
      const bool sparse = IsSparse(ctx, topk, r0 + i);
      if (sparse) {
        int64_t j = 0;
        ForSelected(ctx, topk, r0 + i, [&](int64_t t) {
          if (j >= k0 && j < k0 + n) sel[j - k0] = t;
          ++j;
        });
      }
      const float* qa = q_lat + (h0 * m + i) * Rkv;
      const float* qb = q + ((r0 + i) * H + h0) * Dq + Dn;
      const bool one = part.parts == 1;
      float* out = one ? o_lat + (h0 * m + i) * Rkv : parts + (u * H + h0) * Rkv;
      const int64_t ldo = one ? m * Rkv : Rkv;
      float* stats = one ? nullptr : part_stats + (u * H + h0) * 2;
      if (in_place) {
        const uint16_t* const* ka = shared16 + k0;
        const uint16_t* const* kb = shared16 + S + k0;
        if (sparse) {
          MX_CHECK(ctx.kv.MlaRowsBf16(g.seq, layer, {sel, static_cast<size_t>(n)}, ka16));
          for (int64_t j = 0; j < n; ++j) ka16[K + j] = ka16[j] + Rkv;
          ka = ka16;
          kb = ka16 + K;
        }
        ctx.kt.attend_rows_bf16(qa, m * Rkv, qb, Dq, h1 - h0, Rkv, Dr, ka, kb, ka, Rkv, n, nullptr,
                                nullptr, 0, scale, b.scratch, out, ldo, stats);
        continue;
      }
      const float* const* ka = shared + k0;
      const float* const* kb = shared + S + k0;
      if (sparse) {
        for (int64_t j = 0; j < n; ++j) {
          b.ka[j] = rows + slot[sel[j]] * W;
          b.kb[j] = b.ka[j] + Rkv;
        }
        ka = b.ka;
        kb = b.kb;
      }
      ctx.kt.attend_rows(qa, m * Rkv, qb, Dq, h1 - h0, Rkv, Dr, ka, kb, ka, Rkv, n, nullptr,
                         nullptr, 0, scale, b.scratch, out, ldo, stats);
    }
  });
  // Each query in several parts: its heads' parts folded in key order into o_lat.
  if (parted_any) {
    const float** p = Grow(s.part_ptr, 2 * n_units);
    for (int64_t u = 0; u < n_units; ++u) {
      p[u] = parts + u * H * Rkv;
      p[n_units + u] = part_stats + u * H * 2;
    }
    ctx.pool.parallel_for(0, n_units, [&](int64_t lo, int64_t hi, int) {
      for (int64_t u = lo; u < hi; ++u) {
        const KeyPart& k = s.units[u];
        if (k.parts == 1 || (u > 0 && s.units[u - 1].query == k.query)) continue;
        ctx.kt.attend_combine(H, Rkv, k.parts, p + u, Rkv, p + n_units + u, o_lat + k.query * Rkv,
                              m * Rkv);
      }
    });
  }
  // o[h] [m, Dv] = o_lat[h] · W_UVᵀ, one GEMM per head, straight into o's head columns.
  PerHeadGemm(ctx, KvBKernels(ctx), o_lat, Rkv, m * Rkv, m, w.kv_b_proj, Dn, Dkv, Dv, o, H * Dv, Dv,
              s.oh);
}

}  // namespace

void MlaProject(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* a,
                float* cq, float* q) {
  MlaQuery(ctx, w, layer, a, cq, q);
  MlaWriteKv(ctx, w, layer, a);
}

void MlaQuery(const LayerContext& ctx, const AttentionWeights& w, int64_t /*layer*/, const float* a,
              float* cq, float* q) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), H = w.heads, Dn = c.qk_nope_head_dim, Dr = c.qk_rope_head_dim,
                Rq = c.q_lora_rank, Dq = Dn + Dr;
  const float eps = static_cast<float>(c.rms_norm_eps);
  OpTimer ta(ctx.opts.profile, Op::kQkvA);
  Linear(ctx.kt, ctx.pool, a, T, w.q_a_proj, cq);  // [T, Rq]
  for (int64_t r = 0; r < T; ++r) {
    ctx.kt.rms_norm(cq + r * Rq, w.q_a_layernorm.data(), eps, Rq, cq + r * Rq);
  }
  {
    OpTimer tb(ctx.opts.profile, Op::kQb);
    Linear(ctx.kt, ctx.pool, cq, T, w.q_b_proj, q);  // [T, H, Dn+Dr]
  }
  ForRows(ctx.pool, T, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t h = 0; h < H; ++h) {  // note: the rope slice is the LAST Dr of each head
        ctx.kt.rope(q + (r * H + h) * Dq + Dn, Dr, ctx.cos(r), ctx.sin(r), c.rope_interleave);
      }
    }
  });
}

void MlaWriteKv(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* a) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), Dr = c.qk_rope_head_dim, Rkv = c.kv_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  OpTimer ta(ctx.opts.profile, Op::kQkvA);
  float* kv = Grow(MlaBuffers().kv, T * (Rkv + Dr));  // [T, Rkv+Dr] → [latent c | k_pe] in place
  Linear(ctx.kt, ctx.pool, a, T, w.kv_a_proj_with_mqa, kv);
  for (const RowGroup& g : ctx.groups) {
    for (int64_t r = g.begin; r < g.end; ++r) {
      float* row = kv + r * (Rkv + Dr);
      ctx.kt.rms_norm(row, w.kv_a_layernorm.data(), eps, Rkv, row);
      ctx.kt.rope(row + Rkv, Dr, ctx.cos(r), ctx.sin(r), c.rope_interleave);
      ctx.kv.WriteMlaRow(g.seq, layer, ctx.pos[r], row);
    }
  }
}

void MlaAttend(const LayerContext& ctx, const AttentionWeights& w, int64_t layer, const float* q,
               const int32_t* topk, float* out) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), H = w.heads, Dv = c.v_head_dim;
  OpTimer tat(ctx.opts.profile, Op::kAttention);
  float* o = Grow(MlaBuffers().o, T * H * Dv);  // [T, H·Dv]
  std::fill(o, o + T * H * Dv, std::numeric_limits<float>::quiet_NaN());
  for (const RowGroup& g : ctx.groups) {
    int64_t split = g.begin;  // first sparse row (positions ascend: the dense rows lead)
    while (split < g.end && !IsSparse(ctx, topk, split)) ++split;
    // The cheapest of: all expanded, all absorbed, or dense rows expanded and sparse absorbed
    // (dense absorbed with sparse expanded never wins: same decompression as all expanded, and
    // absorbed dense attention costs more per key).
    int64_t cut = g.begin;  // rows [g.begin, cut) expanded, [cut, g.end) absorbed
    switch (ctx.opts.mla_form) {
      case MlaForm::kExpanded:
        cut = g.end;
        break;
      case MlaForm::kAbsorbed:
        cut = g.begin;
        break;
      case MlaForm::kAuto: {
        const int64_t all_exp = FormCost(ctx, topk, H, g.begin, g.end, false);
        const int64_t all_abs = FormCost(ctx, topk, H, g.begin, g.end, true);
        const int64_t mixed = FormCost(ctx, topk, H, g.begin, split, false) +
                              FormCost(ctx, topk, H, split, g.end, true);
        const int64_t best = std::min({all_exp, all_abs, mixed});
        cut = best == all_exp ? g.end : best == mixed ? split : g.begin;
        if (g.end - g.begin == 1) cut = g.begin;  // decode: absorbed (even at position 0)
        break;
      }
    }
    if (cut > g.begin)
      AttendExpanded(ctx, w, layer, g, g.begin, cut, q, topk, o + g.begin * H * Dv);
    if (cut < g.end) AttendAbsorbed(ctx, w, layer, g, cut, g.end, q, topk, o + cut * H * Dv);
  }
  OpTimer to(ctx.opts.profile, Op::kOProj);
  Linear(ctx.kt, ctx.pool, o, T, w.o_proj, out);  // [T, D]
}

}  // namespace mx
