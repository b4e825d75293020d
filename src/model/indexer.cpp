// DSA indexer (see indexer.h).
#include "model/indexer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/scratch.h"
#include "kernels/attention_kernels.h"

namespace mx {

namespace {

constexpr float kIndexerNormEps = 1e-6f;  // k_norm LayerNorm eps (not in config.json)

void LayerNorm(float* x, const float* w, const float* b, float eps, int64_t n) {
  float mu = 0.0f;
  for (int64_t i = 0; i < n; ++i) mu += x[i];
  mu /= static_cast<float>(n);
  float var = 0.0f;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mu) * (x[i] - mu);
  var /= static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - mu) * inv * w[i] + b[i];
}

struct IndexerScratch {
  std::vector<float> qi;                   // [T, Hi, Di]
  std::vector<float> ki;                   // [T, Di]
  std::vector<float> hw;                   // [T, Hi]
  std::vector<float> panels;               // [S / 16, Di, 16] the group's keys
  std::vector<const uint16_t*> panel_ptr;  // [S / 16] the group's keys in a bf16 store, in place
  std::vector<float> key;                  // [workers, Di]
  std::vector<float> scores;               // [workers, S]
  std::vector<int32_t> topk_scratch;       // [workers, TopKSetScratch(S)]
};

IndexerScratch& IndexerBuffers() {
  static thread_local IndexerScratch s;
  return s;
}

// Every row's key: k = rope(LayerNorm(a · wkᵀ)), written at (seq, layer, pos).
void WriteKeys(const LayerContext& ctx, const IndexerWeights& w, int64_t layer, const float* a) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), Di = c.index_head_dim, Dr = c.qk_rope_head_dim;
  float* ki = Grow(IndexerBuffers().ki, T * Di);  // [T, Di]
  Linear(ctx.kt, ctx.pool, a, T, w.wk, ki);
  for (int64_t r = 0; r < T; ++r) {
    float* k = ki + r * Di;
    LayerNorm(k, w.k_norm_weight.data(), w.k_norm_bias.data(), kIndexerNormEps, Di);
    ctx.kt.rope(k, Dr, ctx.cos(r), ctx.sin(r), c.indexer_rope_interleave);
  }
  for (const RowGroup& g : ctx.groups) {
    for (int64_t r = g.begin; r < g.end; ++r) {
      ctx.kv.WriteIndexerKeyRow(g.seq, layer, ctx.pos[r], ki + r * Di);
    }
  }
}

}  // namespace

void IndexerWriteKeys(const LayerContext& ctx, const IndexerWeights& w, int64_t layer,
                      const float* a) {
  OpTimer t(ctx.opts.profile, Op::kIndexer);
  WriteKeys(ctx, w, layer, a);
}

void IndexerTopK(const LayerContext& ctx, const IndexerWeights& w, int64_t layer, const float* a,
                 const float* cq, int32_t* topk, bool keys_written) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), Hi = c.index_n_heads, Di = c.index_head_dim,
                Dr = c.qk_rope_head_dim, K = c.index_topk;
  OpTimer t(ctx.opts.profile, Op::kIndexer);
  IndexerScratch& s = IndexerBuffers();
  float* qi = Grow(s.qi, T * Hi * Di);  // [T, Hi, Di], per head [rope | nope]
  Linear(ctx.kt, ctx.pool, cq, T, w.wq_b, qi);
  float* hw = Grow(s.hw, T * Hi);  // [T, Hi] head weights
  Linear(ctx.kt, ctx.pool, a, T, w.weights_proj, hw);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(Hi));
  for (int64_t i = 0; i < T * Hi; ++i) hw[i] *= w_scale;
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t h = 0; h < Hi; ++h) {  // note: the rope slice is the FIRST Dr of each head
      ctx.kt.rope(qi + (r * Hi + h) * Di, Dr, ctx.cos(r), ctx.sin(r), c.indexer_rope_interleave);
    }
  }
  if (!keys_written) WriteKeys(ctx, w, layer, a);
  const float dot_scale = 1.0f / std::sqrt(static_cast<float>(Di));
  for (const RowGroup& g : ctx.groups) {
    // Rows whose context fits in K take all of 0..p; the rest are scored against the group's
    // keys, read once into panels (attention_kernels.h: [Di, 16] per 16 positions).
    int64_t first_scored = g.end;
    for (int64_t r = g.begin; r < g.end; ++r) {
      const int64_t p = ctx.pos[r];
      int32_t* out = topk + r * K;
      std::fill(out, out + K, -1);
      if (p + 1 <= K) {
        for (int64_t t = 0; t <= p; ++t) out[t] = static_cast<int32_t>(t);
      } else {
        first_scored = std::min(first_scored, r);
      }
    }
    if (first_scored == g.end) continue;
    const int64_t S = ctx.pos[g.end - 1] + 1;
    const int workers = ctx.pool.size();
    const int64_t n_panels = (S + kIndexerPanel - 1) / kIndexerPanel;
    // A store that keeps the keys as bf16 panels is scored in place (indexer_scores_bf16: the
    // bits of indexer_scores over the widened panels); otherwise the keys are read into panels.
    const uint16_t** in_place = Grow(s.panel_ptr, n_panels);
    const bool bf16_panels = ctx.kv.IndexerPanelsBf16(g.seq, layer, S, in_place);
    float* panels = bf16_panels ? nullptr : Grow(s.panels, IndexerPanelFloats(S, Di));
    float* keys = Grow(s.key, workers * Di);  // one row buffer per worker
    if (!bf16_panels)
      ctx.pool.parallel_for(0, n_panels, [&](int64_t lo, int64_t hi, int worker) {
        float* key = keys + worker * Di;
        for (int64_t t = lo * kIndexerPanel; t < std::min(S, hi * kIndexerPanel); ++t) {
          if (t % kIndexerPanel == 0) {  // zero each panel first: its lanes past S stay 0
            std::fill(panels + IndexerPanelIndex(t, 0, Di),
                      panels + IndexerPanelIndex(t, 0, Di) + kIndexerPanel * Di, 0.0f);
          }
          ctx.kv.ReadIndexerKeyRow(g.seq, layer, t, key);
          for (int64_t d = 0; d < Di; ++d) panels[IndexerPanelIndex(t, d, Di)] = key[d];
        }
      });
    float* scores = Grow(s.scores, workers * S);
    int32_t* tk_scratch = Grow(s.topk_scratch, workers * TopKSetScratch(S));
    auto score = [&](int64_t r, int64_t p0, int64_t p1, float* sc) {  // panels [p0, p1) of row r
      const int64_t t0 = p0 * kIndexerPanel, n = std::min(ctx.pos[r] + 1, p1 * kIndexerPanel) - t0;
      if (bf16_panels) {
        ctx.kt.indexer_scores_bf16(qi + r * Hi * Di, hw + r * Hi, Hi, Di, in_place + p0, n,
                                   dot_scale, sc + t0);
      } else {
        ctx.kt.indexer_scores(qi + r * Hi * Di, hw + r * Hi, Hi, Di,
                              panels + p0 * kIndexerPanel * Di, n, dot_scale, sc + t0);
      }
    };
    const int64_t n_scored = g.end - first_scored;
    if (n_scored < workers) {
      // Fewer rows than threads (a decode step): each row's keys split between the threads by
      // panels (a key's score does not depend on its neighbours: the same bits), then its top-k.
      for (int64_t r = first_scored; r < g.end; ++r) {
        const int64_t row_panels = (ctx.pos[r] + 1 + kIndexerPanel - 1) / kIndexerPanel;
        ctx.pool.parallel_for(0, row_panels,
                              [&](int64_t lo, int64_t hi, int) { score(r, lo, hi, scores); });
        ctx.kt.topk_set(scores, ctx.pos[r] + 1, K, topk + r * K, tk_scratch);
      }
      continue;
    }
    // Rows in zig-zag order (row j's cost grows with its position), 4 at a time to whichever
    // thread is free.
    ctx.pool.parallel_for_dynamic(0, n_scored, 4, [&](int64_t lo, int64_t hi, int worker) {
      float* sc = scores + worker * S;
      int32_t* ts = tk_scratch + worker * TopKSetScratch(S);
      for (int64_t j = lo; j < hi; ++j) {
        const int64_t r = first_scored + (j % 2 == 0 ? j / 2 : n_scored - 1 - j / 2);
        const int64_t n = ctx.pos[r] + 1;
        score(r, 0, (n + kIndexerPanel - 1) / kIndexerPanel, sc);
        ctx.kt.topk_set(sc, n, K, topk + r * K, ts);
      }
    });
  }
}

}  // namespace mx
