// DSA indexer (see indexer.h).
#include "model/indexer.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

}  // namespace

void IndexerTopK(const LayerContext& ctx, const IndexerWeights& w, int64_t layer, const float* a,
                 const float* cq, int32_t* topk) {
  const ModelConfig& c = ctx.c;
  const int64_t T = ctx.rows(), Hi = c.index_n_heads, Di = c.index_head_dim,
                Dr = c.qk_rope_head_dim, K = c.index_topk;
  std::vector<float> qi(T * Hi * Di);  // [T, Hi, Di], per head [rope | nope]
  Linear(ctx.kt, ctx.pool, cq, T, w.wq_b, qi.data());
  std::vector<float> ki(T * Di);  // [T, Di]
  Linear(ctx.kt, ctx.pool, a, T, w.wk, ki.data());
  std::vector<float> hw(T * Hi);  // [T, Hi] head weights
  Linear(ctx.kt, ctx.pool, a, T, w.weights_proj, hw.data());
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(Hi));
  for (float& v : hw) v *= w_scale;
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t h = 0; h < Hi; ++h) {  // note: the rope slice is the FIRST Dr of each head
      ctx.kt.rope(qi.data() + (r * Hi + h) * Di, Dr, ctx.cos(r), ctx.sin(r),
                  c.indexer_rope_interleave);
    }
    float* k = ki.data() + r * Di;
    LayerNorm(k, w.k_norm_weight.data(), w.k_norm_bias.data(), kIndexerNormEps, Di);
    ctx.kt.rope(k, Dr, ctx.cos(r), ctx.sin(r), c.indexer_rope_interleave);
  }
  for (const RowGroup& g : ctx.groups) {
    for (int64_t r = g.begin; r < g.end; ++r) {
      ctx.kv.WriteIndexerKeyRow(g.seq, layer, ctx.pos[r], ki.data() + r * Di);
    }
  }
  const float dot_scale = 1.0f / std::sqrt(static_cast<float>(Di));
  std::vector<float> scores;
  std::vector<float> keys;  // [p+1, Di] cached keys of the current group
  for (const RowGroup& g : ctx.groups) {
    int64_t n_keys = 0;
    for (int64_t r = g.begin; r < g.end; ++r) {
      const int64_t p = ctx.pos[r], n = std::min<int64_t>(K, p + 1);
      int32_t* out = topk + r * K;
      std::fill(out, out + K, -1);
      if (n == p + 1) {
        for (int64_t t = 0; t <= p; ++t) out[t] = static_cast<int32_t>(t);
        continue;
      }
      scores.assign(p + 1, 0.0f);
      keys.resize((p + 1) * Di);
      for (; n_keys <= p; ++n_keys) {
        ctx.kv.ReadIndexerKeyRow(g.seq, layer, n_keys, keys.data() + n_keys * Di);
      }
      for (int64_t t = 0; t <= p; ++t) {
        const float* kt = keys.data() + t * Di;
        float s = 0.0f;
        for (int64_t h = 0; h < Hi; ++h) {
          const float* qh = qi.data() + (r * Hi + h) * Di;
          float d = 0.0f;
          for (int64_t i = 0; i < Di; ++i) d += qh[i] * kt[i];
          s += hw[r * Hi + h] * std::max(d * dot_scale, 0.0f);
        }
        scores[t] = s;
      }
      ctx.kt.topk(scores.data(), p + 1, n, out);
      std::sort(out, out + n);
    }
  }
}

}  // namespace mx
