// What every layer of one forward call shares: the config, kernels, thread pool, KV store,
// options and the query rows (their sequences, positions and RoPE angles). Built once per
// forward by the Model; layers read it and write only their outputs and the KV store.
// Legend: T rows, Dr qk_rope_head_dim.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_store.h"

namespace mx {

// Rows [begin, end) belong to one sequence, positions ascending and contiguous.
struct RowGroup {
  int64_t seq;
  int64_t begin, end;
};

struct LayerContext {
  const ModelConfig& c;
  const KernelTable& kt;
  ThreadPool& pool;
  KvStore& kv;
  const ForwardOptions& opts;
  std::vector<int64_t> pos;  // [T]
  std::vector<RowGroup> groups;
  std::vector<float> rope_cos;  // [T, Dr/2]
  std::vector<float> rope_sin;  // [T, Dr/2]

  int64_t rows() const { return static_cast<int64_t>(pos.size()); }
  const float* cos(int64_t r) const { return rope_cos.data() + r * (c.qk_rope_head_dim / 2); }
  const float* sin(int64_t r) const { return rope_sin.data() + r * (c.qk_rope_head_dim / 2); }
};

// fn(r0, r1) over rows [0, n): split over the pool where there are enough rows to pay for the
// call (a prefill's norms, residual adds and rope; a decode step's few rows run inline).
inline constexpr int64_t kPoolRows = 16;
template <typename Fn>
void ForRows(ThreadPool& pool, int64_t n, Fn fn) {
  if (n < kPoolRows) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int) { fn(lo, hi); });
}

// Fills pos/rope tables for groups: inv_freq_j = θ^(−2j/Dr), φ = p·inv_freq_j in float64, then
// cos/sin rounded to fp32 (as the reference does).
void FillRopeTables(LayerContext& ctx);

}  // namespace mx
