// Per-op wall time of a forward, for benchmarks (bench/model_bench `ops=1`): where a prefill or a
// decode step spends its time at a model's real widths. Exclusive: a timed op inside another
// (kv_b's products inside attention) pauses the outer one, so the ops sum to the forward.
// Set ForwardOptions::profile to collect; nullptr (the default) costs one branch per op.
// Thread-safety: one forward at a time per profile; timers run on the forward's calling thread
// around the parallel calls (each op is a barrier of the pool).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace mx {

enum class Op : int {
  kEmbed,
  kNorm,       // rms norms, rope and the residual adds between the ops
  kQkvA,       // q_a_proj and kv_a_proj_with_mqa (+ their norms, rope, the cache write)
  kQb,         // q_b_proj
  kIndexer,    // the DSA indexer (wq_b, wk, weights_proj, scores, top-k)
  kKvB,        // products with kv_b_proj (decompressing latents, absorbing queries / outputs)
  kAttention,  // the attention kernels (scores, softmax, values)
  kOProj,      // o_proj
  kDenseMlp,   // the dense layers' SwiGLU MLP
  kRouter,     // MoE router logits and routing
  kExperts,    // routed + shared experts
  kLmHead,
  kMtp,  // the MTP layer
  kCount
};

constexpr std::array<std::string_view, static_cast<int>(Op::kCount)> kOpNames = {
    "embed",
    "norms/rope/residual",
    "q_a + kv_a",
    "q_b",
    "indexer",
    "kv_b",
    "attention",
    "o_proj",
    "dense MLP",
    "MoE router",
    "MoE experts (routed + shared)",
    "lm_head",
    "MTP layer"};

class OpProfile {
 public:
  using Clock = std::chrono::steady_clock;

  std::array<double, static_cast<int>(Op::kCount)> seconds{};
  std::array<int64_t, static_cast<int>(Op::kCount)> calls{};

  double Total() const {
    double t = 0;
    for (double s : seconds) t += s;
    return t;
  }

  // The time since the last switch goes to the running op; `next` runs from now. Returns the op
  // that was running.
  Op Switch(Op next) {
    const Clock::time_point now = Clock::now();
    seconds[static_cast<int>(current_)] += std::chrono::duration<double>(now - since_).count();
    const Op prev = current_;
    current_ = next;
    since_ = now;
    return prev;
  }
  // Starts a forward: time outside timed ops counts as kNorm.
  void Begin() {
    current_ = Op::kNorm;
    since_ = Clock::now();
  }
  void End() { Switch(Op::kNorm); }

 private:
  Op current_ = Op::kNorm;
  Clock::time_point since_ = Clock::now();
};

// Times its scope as `op` when profile is set.
class OpTimer {
 public:
  OpTimer(OpProfile* profile, Op op) : p_(profile) {
    if (p_ != nullptr) {
      prev_ = p_->Switch(op);
      ++p_->calls[static_cast<int>(op)];
    }
  }
  ~OpTimer() {
    if (p_ != nullptr) p_->Switch(prev_);
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpProfile* p_;
  Op prev_ = Op::kNorm;
};

}  // namespace mx
