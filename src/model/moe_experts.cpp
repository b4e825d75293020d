// The expert half of the MoE block under a MoeKernelConfig (see moe.h, moe_config.h).
//
// Every active expert (ascending), then the shared expert over all rows, becomes one or more
// jobs (token_tile splits an expert's rows); a job's rows are gathered into X [R, D], its gate /
// SiLU·up output lives in G (U the up projection; [n, f] per job, f = the job's width, the
// shared expert's being n_shared · F), its down output in Y [R, D].
// Jobs are combined serially in job order, so every config sums the same products in the same
// order as the untuned path. Legend: T rows, R Σ job rows, D model_dim, F moe_inter.
#include <algorithm>
#include <vector>

#include "base/check.h"
#include "base/scratch.h"
#include "kernels/mxfp4.h"
#include "model/moe.h"
#include "model/weight_bytes.h"
#include "model/weight_format.h"

namespace mx {

namespace {

struct Job {
  const MlpWeights* w;
  const int64_t* rows;   // token rows, ascending
  const float* weights;  // gate weights; nullptr = 1 (shared expert)
  int64_t n;             // rows in this job
  int64_t off;           // first row in X / Y
  int64_t f;             // width (gate_proj rows)
  int64_t goff;          // first element in G / U (Σ earlier n · f)
  bool mx;  // Q8 activations: MXFP4 weights (the shared expert may be bf16 when routed are MXFP4)
};

// The runner's working memory, kept per calling thread across calls (grown once to the largest
// batch, base/scratch.h: every element is written before it is read), so a forward step does
// not allocate, fault in and clear ~100 MB per MoE layer.
struct Workspace {
  std::vector<float> x, g, u, y;
  std::vector<BlockQ8> xq, hq;
};

// The activations of one job: fp32 rows, and their Q8 blocks for an MXFP4 weight.
struct Act {
  const float* f;
  const BlockQ8* q;
};

// y[i, c0..c1) = x_i · W[c0..c1)ᵀ for i < m, through the raw kernel of w's format (no threads).
void LinearCols(const KernelTable& kt, const LinearWeight& w, Act x, int64_t m, int64_t c0,
                int64_t c1, float* y, int64_t ldy, GemmTiling t) {
  if (c1 <= c0 || m == 0) return;
  FormatOf(w).gemm_cols(kt, w, x.f, x.q, m, c0, c1, y, ldy, t);
}

class ExpertRunner {
 public:
  ExpertRunner(const KernelTable& kt, ThreadPool& pool, const MoeWeights& w, const float* m,
               int64_t T, const std::vector<ExpertRows>& by_expert, const MoeKernelConfig& cfg)
      : kt_(kt), pool_(pool), cfg_(cfg), T_(T), D_(w.gate.empty() ? 0 : w.gate.k) {
    thread_local Workspace ws;
    ws_ = &ws;
    const MlpWeights* any = w.has_shared ? &w.shared_experts : nullptr;
    for (size_t e = 0; e < by_expert.size() && any == nullptr; ++e) {
      if (!by_expert[e].rows.empty()) any = &w.experts[e];
    }
    if (any == nullptr) return;  // no rows for an expert held here (ep): Run writes zeros
    D_ = any->gate_proj.k;
    shared_rows_.resize(T);
    for (int64_t r = 0; r < T; ++r) shared_rows_[r] = r;
    for (size_t e = 0; e < by_expert.size(); ++e) {
      const ExpertRows& er = by_expert[e];
      AddJobs(&w.experts[e], er.rows.data(), er.weights.data(),
              static_cast<int64_t>(er.rows.size()));
    }
    if (w.has_shared) AddJobs(&w.shared_experts, shared_rows_.data(), nullptr, T);
    x_ = Grow(ws_->x, R_ * D_);
    y_ = Grow(ws_->y, R_ * D_);
    if (cfg.split != MoeSplit::kColumns || cfg.fuse_gate_up) {  // the plain path has its own
      g_ = Grow(ws_->g, G_);
      u_ = Grow(ws_->u, G_);
    }
    if (mx_) {
      xq_ = Grow(ws_->xq, R_ * (D_ / 32));
      hq_ = Grow(ws_->hq, G_ / 32);
    }
    // Gathered in parallel: at prefill sizes this copy is ~R·D·4 bytes (tens of MB).
    pool_.parallel_for(0, static_cast<int64_t>(jobs_.size()), [&](int64_t lo, int64_t hi, int) {
      for (int64_t ji = lo; ji < hi; ++ji) {
        const Job& j = jobs_[ji];
        for (int64_t i = 0; i < j.n; ++i) {
          std::copy(m + j.rows[i] * D_, m + (j.rows[i] + 1) * D_, x_ + (j.off + i) * D_);
        }
      }
    });
  }

  void Run(float* out) {
    std::fill(out, out + T_ * std::max<int64_t>(D_, 0), 0.0f);
    if (jobs_.empty()) return;
    switch (cfg_.split) {
      case MoeSplit::kColumns:
        for (const Job& j : jobs_) cfg_.fuse_gate_up ? ColumnsFused(j) : ColumnsPlain(j);
        break;
      case MoeSplit::kBatched:
        Batched();
        break;
      case MoeSplit::kExperts:
        WholeExperts();
        break;
    }
    for (const Job& j : jobs_) {
      for (int64_t i = 0; i < j.n; ++i) {
        float* o = out + j.rows[i] * D_;
        const float* y = y_ + (j.off + i) * D_;
        if (j.weights == nullptr) {
          for (int64_t d = 0; d < D_; ++d) o[d] += y[d];
        } else {
          const float wt = j.weights[i];
          for (int64_t d = 0; d < D_; ++d) o[d] += y[d] * wt;
        }
      }
    }
  }

 private:
  void AddJobs(const MlpWeights* w, const int64_t* rows, const float* weights, int64_t n) {
    const int64_t tile = cfg_.token_tile > 0 ? cfg_.token_tile : std::max<int64_t>(n, 1);
    for (int64_t b = 0; b < n; b += tile) {
      const int64_t c = std::min(tile, n - b);
      const int64_t f = w->gate_proj.n;
      const bool mx = FormatOf(w->gate_proj).q8_activations;
      jobs_.push_back({w, rows + b, weights == nullptr ? nullptr : weights + b, c, R_, f, G_, mx});
      mx_ = mx_ || mx;
      R_ += c;
      G_ += c * f;
    }
  }

  Act X(const Job& j) const { return {x_ + j.off * D_, j.mx ? xq_ + j.off * (D_ / 32) : nullptr}; }
  Act H(const Job& j) const { return {g_ + j.goff, j.mx ? hq_ + j.goff / 32 : nullptr}; }

  // Q8 blocks of the job's X rows / G rows (MXFP4 weights only).
  void QuantizeX(const Job& j) {
    if (!j.mx) return;
    for (int64_t r = j.off; r < j.off + j.n; ++r) {
      QuantizeRowQ8(x_ + r * D_, D_, xq_ + r * (D_ / 32));
    }
  }
  void QuantizeH(const Job& j) {
    if (!j.mx) return;
    for (int64_t i = 0; i < j.n; ++i) {
      QuantizeRowQ8(g_ + j.goff + i * j.f, j.f, hq_ + (j.goff + i * j.f) / 32);
    }
  }
  // Every job's X (or G) rows, jobs split over the pool.
  void QuantizeAll(bool h) {
    if (!mx_) return;
    pool_.parallel_for(0, static_cast<int64_t>(jobs_.size()), [&](int64_t lo, int64_t hi, int) {
      for (int64_t i = lo; i < hi; ++i) h ? QuantizeH(jobs_[i]) : QuantizeX(jobs_[i]);
    });
  }

  // G[:, c0..c1) = SiLU(gate) ⊙ up for the job's rows.
  void GateUp(const Job& j, int64_t c0, int64_t c1) {
    float* g = g_ + j.goff;
    float* u = u_ + j.goff;
    LinearCols(kt_, j.w->gate_proj, X(j), j.n, c0, c1, g, j.f, cfg_.tiling);
    LinearCols(kt_, j.w->up_proj, X(j), j.n, c0, c1, u, j.f, cfg_.tiling);
    for (int64_t i = 0; i < j.n; ++i) {
      kt_.swiglu(g + i * j.f + c0, u + i * j.f + c0, c1 - c0, g + i * j.f + c0);
    }
  }
  void Down(const Job& j, int64_t c0, int64_t c1) {
    LinearCols(kt_, j.w->down_proj, H(j), j.n, c0, c1, y_ + j.off * D_, D_, cfg_.tiling);
  }

  // The untuned path: three threaded GEMMs per job (each quantizing its own input).
  void ColumnsPlain(const Job& j) {
    SwiGluMlp(kt_, pool_, *j.w, x_ + j.off * D_, j.n, y_ + j.off * D_, cfg_.tiling);
  }

  // One parallel pass for gate, up and SiLU·up, one for down.
  void ColumnsFused(const Job& j) {
    QuantizeX(j);
    InGroups(j.w->gate_proj, j.f, [&](int64_t lo, int64_t hi) { GateUp(j, lo, hi); });
    QuantizeH(j);
    InGroups(j.w->down_proj, D_, [&](int64_t lo, int64_t hi) { Down(j, lo, hi); });
  }

  // Columns [0, cols) of w split over the pool at multiples of its format's row group.
  template <typename Fn>
  void InGroups(const LinearWeight& w, int64_t cols, Fn fn) {
    const int64_t g = FormatOf(w).row_group;
    pool_.parallel_for(0, (cols + g - 1) / g,
                       [&](int64_t lo, int64_t hi, int) { fn(lo * g, std::min(hi * g, cols)); });
  }

  // What one output column of the pass costs a worker: its multiply-adds (rows × k) and the
  // bytes of weights it streams, kMacsPerByte multiply-adds each (a core's bf16 dot rate over
  // its share of the read bandwidth, ~250 G / ~40 GB/s). At a decode's few rows the bytes decide:
  // a bf16 shared expert's column costs ~4 MXFP4 ones, and a split by rows × columns alone left
  // the worker holding it streaming ~60% more than the other.
  static constexpr int64_t kMacsPerByte = 6;
  int64_t ColumnCost(const Job& j, bool down) const {
    auto bytes = [](const LinearWeight& w) { return WeightBytes(w) / std::max<int64_t>(w.n, 1); };
    if (down) return j.n * j.f + kMacsPerByte * bytes(j.w->down_proj);
    return 2 * j.n * D_ + kMacsPerByte * (bytes(j.w->gate_proj) + bytes(j.w->up_proj));
  }

  // start[i] = Σ cost(j) over the jobs j < i; start[jobs] = the total.
  template <typename Cost>
  std::vector<int64_t> CostStarts(Cost cost) const {
    std::vector<int64_t> start(jobs_.size() + 1, 0);
    for (size_t i = 0; i < jobs_.size(); ++i) start[i + 1] = start[i] + cost(i);
    return start;
  }

  // Every job's columns in one pass, split by cost (ColumnCost × columns; `down` = D columns,
  // else the job's width): a worker owns the columns whose cost interval starts in its range
  // (boundaries rounded up to the format's row group), so each column has exactly one owner.
  template <typename Fn>
  void ByCost(bool down, Fn fn) {
    std::vector<int64_t> per(jobs_.size());  // per column
    for (size_t i = 0; i < jobs_.size(); ++i)
      per[i] = std::max<int64_t>(1, ColumnCost(jobs_[i], down));
    const std::vector<int64_t> start =
        CostStarts([&](size_t i) { return per[i] * (down ? D_ : jobs_[i].f); });
    pool_.parallel_for(0, start.back(), [&](int64_t lo, int64_t hi, int) {
      for (size_t i = 0; i < jobs_.size(); ++i) {
        const Job& j = jobs_[i];
        const int64_t cols = down ? D_ : j.f;
        const int64_t g = FormatOf(down ? j.w->down_proj : j.w->gate_proj).row_group;
        auto col = [&](int64_t x) {  // rounded up to the row group: one owner per group
          const int64_t c = std::clamp<int64_t>((x - start[i] + per[i] - 1) / per[i], 0, cols);
          return std::min((c + g - 1) / g * g, cols);
        };
        const int64_t c0 = col(lo), c1 = col(hi);
        if (c0 < c1) fn(j, c0, c1);
      }
    });
  }

  void Batched() {
    QuantizeAll(false);
    ByCost(false, [&](const Job& j, int64_t c0, int64_t c1) { GateUp(j, c0, c1); });
    QuantizeAll(true);
    ByCost(true, [&](const Job& j, int64_t c0, int64_t c1) { Down(j, c0, c1); });
  }

  // Whole jobs per worker, balanced by cost (ColumnCost over the job's gate/up and down
  // columns): the jobs whose cost interval starts in its range.
  void WholeExperts() {
    QuantizeAll(false);
    const std::vector<int64_t> start = CostStarts([&](size_t i) {
      const Job& j = jobs_[i];
      return ColumnCost(j, false) * j.f + ColumnCost(j, true) * D_;
    });
    pool_.parallel_for(0, start.back(), [&](int64_t lo, int64_t hi, int) {
      for (size_t i = 0; i < jobs_.size(); ++i) {
        const Job& j = jobs_[i];
        if (start[i] < lo || start[i] >= hi) continue;
        GateUp(j, 0, j.f);
        QuantizeH(j);
        Down(j, 0, D_);
      }
    });
  }

  const KernelTable& kt_;
  ThreadPool& pool_;
  const MoeKernelConfig cfg_;
  const int64_t T_;
  int64_t D_, R_ = 0, G_ = 0;  // model_dim, Σ n, Σ n · f
  bool mx_ = false;            // any job has MXFP4 weights
  std::vector<int64_t> shared_rows_;
  std::vector<Job> jobs_;
  Workspace* ws_ = nullptr;
  float *x_ = nullptr, *g_ = nullptr, *u_ = nullptr, *y_ = nullptr;  // [R, D], [G], [G], [R, D]
  BlockQ8 *xq_ = nullptr, *hq_ = nullptr;                            // [R, D/32], [G/32] (MXFP4)
};

}  // namespace

void MoeExperts(const KernelTable& kt, ThreadPool& pool, const MoeWeights& w, const float* m,
                int64_t T, const std::vector<ExpertRows>& by_expert, const MoeKernelConfig& cfg,
                float* out) {
  MX_CHECK(ValidRowTile(cfg.tiling.mr));
  MX_CHECK_EQ(by_expert.size(), w.experts.size());
  ExpertRunner run(kt, pool, w, m, T, by_expert, cfg);
  run.Run(out);
}

}  // namespace mx
