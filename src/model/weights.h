// The model's weights, looked up by HF name in a Checkpoint and validated first with
// CheckCheckpoint (every problem in one Status). bf16 matrices stay memory-mapped (zero copy);
// f32 / f16 matrices and every norm vector are held as fp32; the MoE correction bias is read as
// f32 (its values ≈ 34 need fp32, see glm-moe-dsa.md §3.8).
//
// Shape legend (HF names): D hidden_size, V vocab_size, H num_attention_heads,
// Dn qk_nope_head_dim, Dr qk_rope_head_dim, Dv v_head_dim, Rq q_lora_rank, Rkv kv_lora_rank,
// Hi index_n_heads, Di index_head_dim, E n_routed_experts, F moe_intermediate_size,
// Fd intermediate_size.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/checkpoint_check.h"
#include "model/load_progress.h"
#include "model/shard.h"

namespace mx {

// A linear weight W[n, k] (HF [out, in]); bf16 (usually a view into the mapped file), fp32
// (owned) or MXFP4 (dtype kU8: packed once at load into the kernels' 16-row groups,
// kernels/mxfp4.h). What each format means — loading, element access, slicing, GEMMs, bytes —
// is one entry of the table in model/weight_format.h. Move-only, so a pointer never refers to
// another object's owned storage; use Rows() for a view.
struct LinearWeight {
  LinearWeight() = default;
  LinearWeight(LinearWeight&&) noexcept = default;
  LinearWeight& operator=(LinearWeight&&) noexcept = default;
  LinearWeight(const LinearWeight&) = delete;
  LinearWeight& operator=(const LinearWeight&) = delete;

  DType dtype = DType::kBF16;      // kBF16, kF32, kU8 = MXFP4, or kF8_E4M3 = FP8 block-scaled
  const uint16_t* bf16 = nullptr;  // bf16 row-major [n, k] (weights derived in code)
  const uint16_t* bf16p =
      nullptr;  // bf16 packed in 16-row groups (loaded weights; kernels/bf16_packed.h)
  const float* f32 = nullptr;
  const uint8_t* mx_q = nullptr;  // MXFP4 codes, packed (kernels/mxfp4.h)
  const uint8_t* mx_e = nullptr;  // MXFP4 E8M0 scales, packed
  // FP8 (kernels/fp8.h): e4m3 codes [n, k] and the fp32 scales of 128 × 128 blocks, from the
  // block row holding W's row 0, which is row fp8_phase (0..127) of that block row.
  const uint8_t* fp8 = nullptr;
  const float* fp8_s = nullptr;  // [ceil((fp8_phase + n)/128), ceil(k/128)]
  int64_t fp8_phase = 0;
  // FP8 packed for the kernels (kernels/fp8.h PackFp8): codes and per-row scales, owned (or a
  // view of a whole-group row range of another weight's).
  const uint8_t* fp8p = nullptr;
  const float* fp8p_s = nullptr;
  int64_t n = 0, k = 0;
  std::vector<float> owned_f32;      // backing store when converted (f16/f32)
  std::vector<uint16_t> owned_bf16;  // backing store when the mapped data is misaligned
  std::vector<uint8_t> owned_mx_q;   // packed MXFP4 codes; FP8 codes when copied
  std::vector<uint8_t> owned_mx_e;   // MXFP4 scales
  std::vector<float> owned_fp8_s;    // FP8 scales when copied or misaligned
  std::vector<uint8_t> owned_fp8p;   // FP8 packed codes
  std::vector<float> owned_fp8p_s;   // FP8 packed scales

  bool is_mxfp4() const { return dtype == DType::kU8; }

  bool empty() const { return n == 0; }
  float at(int64_t row, int64_t col) const;  // element as fp32 (slow path)
  // A non-owning view of rows [first, first + count). REQUIRES: *this outlives the view.
  LinearWeight Rows(int64_t first, int64_t count) const;
};

// Rows [first, first + count) of `w` as a weight of its own: a view when `w` is itself a view
// into the mapped file, else a copy of those rows (so the result never points into `w`).
LinearWeight SliceRows(LinearWeight w, int64_t first, int64_t count);
struct LinearFormat;
// Whether columns [first, first + count) of a weight of format `f` with k columns can be cut
// off (whole blocks, or for FP8 a slice ending at k). Errors: SliceCols's.
Status CheckColSlice(const LinearFormat& f, int64_t k, int64_t first, int64_t count,
                     const std::string& name);
// Columns [first, first + count) of `w`, copied. Errors: InvalidArgument naming `name` when
// first or count is not a multiple of the format's block (MXFP4: 32 elements).
Result<LinearWeight> SliceCols(const LinearWeight& w, int64_t first, int64_t count,
                               const std::string& name);

// y[m, n] = x[m, k] · Wᵀ (fp32 accumulation, threaded over n, y poisoned with NaN first), by
// the GEMM of w's format: MXFP4 weights take the int8-activation kernel (kernels/mxfp4.h).
// `t`: the kernels' loop order.
void Linear(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
            const LinearWeight& w, float* y, GemmTiling t = {});

// Under tensor parallelism (model/shard.h) H below is this rank's heads, `heads`.
struct AttentionWeights {
  int64_t heads = 0;                  // H: heads this rank computes
  LinearWeight q_a_proj;              // [Rq, D]
  std::vector<float> q_a_layernorm;   // [Rq]
  LinearWeight q_b_proj;              // [H·(Dn+Dr), Rq], per head [nope | rope]
  LinearWeight kv_a_proj_with_mqa;    // [Rkv+Dr, D], [latent | k_pe]
  std::vector<float> kv_a_layernorm;  // [Rkv]
  LinearWeight kv_b_proj;             // [H·(Dn+Dv), Rkv], per head [k_nope | v]
  LinearWeight o_proj;                // [D, H·Dv]
  // Derived at load for the absorbed (MQA) form: per head W_UKᵀ, the k_nope rows of kv_b_proj
  // transposed, [H·Rkv, Dn] (bf16 when kv_b_proj is, else fp32), so q_lat = W_UKᵀ·q_nope is one
  // GEMM per head over every query row.
  LinearWeight kv_b_uk_t;
};

// kv_b_uk_t from kv_b_proj of `heads` heads (see AttentionWeights).
LinearWeight AbsorbedKeyWeight(const LinearWeight& kv_b_proj, const ModelConfig& c, int64_t heads);

struct IndexerWeights {
  LinearWeight wq_b;                 // [Hi·Di, Rq], per head [rope | nope]
  LinearWeight wk;                   // [Di, D], [rope | nope]
  std::vector<float> k_norm_weight;  // [Di]
  std::vector<float> k_norm_bias;    // [Di]
  LinearWeight weights_proj;         // [Hi, D]
};

// Under tensor parallelism F is this rank's slice of the width; under expert parallelism the
// routed experts of other ranks are left empty.
struct MlpWeights {
  LinearWeight gate_proj;  // [F, D]
  LinearWeight up_proj;    // [F, D]
  LinearWeight down_proj;  // [D, F]
};

struct MoeWeights {
  LinearWeight gate;                           // [E, D]
  std::vector<float> e_score_correction_bias;  // [E], fp32
  std::vector<MlpWeights> experts;             // [E]
  bool has_shared = false;
  MlpWeights shared_experts;
};

struct LayerWeights {
  std::vector<float> input_layernorm;           // [D]
  std::vector<float> post_attention_layernorm;  // [D]
  AttentionWeights attn;
  bool has_indexer = false;  // full-indexer layer
  IndexerWeights indexer;
  bool is_moe = false;
  MlpWeights mlp;  // dense layers
  MoeWeights moe;  // MoE layers
};

struct MtpWeights {
  std::vector<float> enorm;             // [D]
  std::vector<float> hnorm;             // [D]
  LinearWeight eh_proj;                 // [D, 2D], input [enorm(e) | hnorm(h)]
  std::vector<float> shared_head_norm;  // [D]
  LayerWeights layer;                   // model.layers.{num_hidden_layers}.*
};

struct ModelWeights {
  ModelShard shard;                  // the part of the model these are
  LinearWeight embed_tokens;         // [V, D]
  std::vector<float> norm;           // [D]
  LinearWeight lm_head;              // [V, D]; sharded: rows [rank·VocabBlock, ...) of them
  std::vector<LayerWeights> layers;  // [num_hidden_layers]
  bool has_mtp = false;
  MtpWeights mtp;

  // out[D] = embed_tokens[token] as fp32. REQUIRES: 0 <= token < V.
  void Embed(int64_t token, float* out) const;
};

// REQUIRES: `ckpt` outlives the returned weights (bf16 views point into its mapping).
// Each tensor's format is decided from the file (checkpoint_check.h) and cross-checked against
// config.json's quantization_config (CheckQuantization).
// Errors: InvalidArgument with CheckCheckpoint's ProblemSummary (missing / unexpected /
// mis-shaped tensors) or CheckQuantization's list; Unimplemented for fp8 tensors.
// Cross-checks what the file holds against the quantization_config: with a Quark MXFP4 config,
// every linear weight (not the embedding or the router) must be MXFP4 unless an `exclude` entry
// covers it (quant/exclude.h: exact / glob / re:, MTP aliases model.decoder.* and model.*,
// fused and per-expert names), and an excluded one must not be MXFP4; without one, no tensor
// may be MXFP4. Errors: InvalidArgument listing each disagreeing tensor with the expected and
// found dtype and shape.
Status CheckQuantization(const ModelConfig& config, const CheckpointReport& report);

// Every check LoadModelWeights makes before it reads tensor data, in its order: CheckShardable,
// then CheckCheckpoint and CheckQuantization as one error listing every problem. The report's
// pointers refer into `specs` and `ckpt`. (The memory plan, weight_plan.h, runs the same checks.)
Result<CheckpointReport> CheckLoadable(const ModelConfig& config,
                                       const std::vector<TensorSpec>& specs, const Checkpoint& ckpt,
                                       const ModelShard& shard);

// `shard`: the part to load (model/shard.h); tensors of other ranks' experts are not read.
// Each tensor's pages are dropped from the resident set once it is copied (the mapping would
// otherwise hold a second copy of the weights: peak RSS during the load stays near the steady
// RSS after it). `progress`: told of every tensor read (may be null).
// Errors additionally: CheckShardable's, and SliceCols's for an MXFP4 tensor whose slice is not
// 32-aligned.
Result<ModelWeights> LoadModelWeights(const ModelConfig& config, const Checkpoint& ckpt,
                                      const ModelShard& shard = {},
                                      LoadProgress* progress = nullptr);

}  // namespace mx
