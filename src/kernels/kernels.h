// The CPU kernel table: every compute primitive the model forward uses, as function pointers
// chosen once per process from CPUID (STYLE.md 5). Kernels see only pointers and sizes, never
// a model, a request or a config. The `ref` level (kernels_ref.cpp) is the scalar slow twin
// every faster level is tested against (kernels_test.cpp).
//
// Conventions: row-major; "W[N, K]" is a weight in HF [out, in] layout; bf16 is the raw
// uint16_t bit pattern; activations and accumulation are fp32.
// Shape legend: M rows of activations, N output features, K input features, n vector length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention_kernels.h"
#include "kernels/bf16_packed.h"
#include "kernels/fp8.h"
#include "kernels/gemm_tiling.h"
#include "kernels/mxfp4.h"

namespace mx {

enum class KernelLevel { kRef, kAvx2, kAvx512 };
const char* KernelLevelName(KernelLevel l);  // "ref", "avx2", "avx512"

// How gemm_bf16 takes its fp32 activations.
// kFp32: exactly (every level's result differs from fp32 math on the bf16 weights only by
//   summation order; what the model fixtures are pinned to).
// kBf16: rounded to bf16 (round-to-nearest-even) once per call, as llama.cpp, vLLM and sglang
//   run bf16 weights: on AVX512_BF16 one vdpbf16ps per product, 3x the kFp32 rate there. The
//   extra error is that rounding, ≤ 2^-9 of each activation (kernels_test.cpp's kGemmX16Tol).
enum class GemmActivations { kFp32, kBf16 };
const char* GemmActivationsName(GemmActivations a);  // "fp32", "bf16"

struct KernelTable {
  KernelLevel level = KernelLevel::kRef;
  GemmActivations bf16_activations = GemmActivations::kFp32;  // how gemm_bf16 takes x

  // y[M, N] = x[M, K] · W[N, K]ᵀ, W bf16. ldx / ldw / ldy are row strides in elements.
  // `t` is the loop order (gemm_tiling.h; {} = the level's default).
  // REQUIRES: y does not alias x or W; ValidRowTile(t.mr). Every y element in [M, N] is written.
  void (*gemm_bf16)(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y,
                    int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t);
  // Same with an fp32 W (f32 checkpoints; attention scores against cached keys).
  void (*gemm_f32)(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                   int64_t m, int64_t n, int64_t k, GemmTiling t);
  // y[n] = w[n] ⊙ x[n] / sqrt(mean(x²) + eps), computed in fp32. y may alias x.
  void (*rms_norm)(const float* x, const float* w, float eps, int64_t n, float* y);
  // In place: x[n] = softmax(x); -inf entries become 0. REQUIRES: at least one finite entry.
  void (*softmax)(float* x, int64_t n);
  // Rotates x[d] (d even) by precomputed cos[d/2], sin[d/2]: interleaved pairs
  // (x[2j], x[2j+1]) when `interleave`, else NeoX pairs (x[j], x[j + d/2]).
  void (*rope)(float* x, int64_t d, const float* cos, const float* sin, bool interleave);
  // out[k] = indices of the k largest scores[n], descending; ties → lower index first.
  // REQUIRES: k <= n.
  void (*topk)(const float* scores, int64_t n, int64_t k, int32_t* out);
  // out[n] = SiLU(gate[n]) ⊙ up[n]. out may alias gate.
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out);
  // Attention of one query over n cached positions (dense: every position up to the query;
  // sparse: the positions of an index list — the caller passes the rows either way):
  //   s_t = scale · (qa·ka[t] + qb·kb[t]),  p = softmax(s),  out[dv] = Σ_t p_t · v[t].
  // The key is in two parts (qa·ka over da values, qb·kb over db: MLA's latent / no-rope part
  // and its rope part, which sit in different buffers); ka, kb, v are arrays of n row pointers.
  // `scratch` holds n floats. REQUIRES: n >= 1; out does not alias the inputs.
  void (*attend)(const float* qa, const float* qb, int64_t da, int64_t db, const float* const* ka,
                 const float* const* kb, const float* const* v, int64_t dv, int64_t n, float scale,
                 float* scratch, float* out);
  // y[M, r0..r1) = x · Wᵀ with W bf16 packed in 16-row groups (kernels/bf16_packed.h), x taken
  // as bf16_activations says: the GEMM of every loaded bf16 linear weight.
  GemmBf16PackedFn gemm_bf16_packed = nullptr;
  // y[M, N] = x · Wᵀ with W MXFP4 (packed) and x int8 Q8 blocks; see kernels/mxfp4.h.
  // nullptr in a table means the ref kernel (GemmMxfp4 falls back to it).
  GemmMxfp4Fn gemm_mxfp4 = nullptr;
  // Attention of m query rows that share one key set (attention_kernels.h): row i is
  // qa + i·ldqa (da values) and qb + i·ldqb (db values) and attends keys t < lim[i] (lim ==
  // nullptr: every t < n):
  //   s_t = scale · (qa_i·ka[t] + qb_i·kb[t]),  p = softmax(s),  out + i·ldo = Σ_t p_t · v[t][dv].
  // The rows are a query's heads over its selected rows (absorbed MLA: MQA) or one head's
  // queries over a causal prefix (expanded MLA, lim = position + 1). With a mask, row i attends
  // only the keys whose bit t (word t/64, bit t%64) of mask + i·ldm is set (DSA's top-k set
  // over a dense prefix). `scratch` holds AttendRowsScratch(m, dv) floats. With `stats` the
  // call is a part (keys in segments of kAttendSegment, attention_kernels.h): out is left
  // unnormalized, stats[2i] = row i's max score (-inf when it attended no key), stats[2i + 1]
  // its denominator, for attend_combine.
  // REQUIRES: 1 <= lim[i] <= n; without stats every row attends at least one key; out aliases
  // no input.
  AttendRowsFn attend_rows = nullptr;
  // attend_rows over bf16 rows (a bf16 KV cache read in place): the same bits as attend_rows
  // over the rows widened to fp32, in every table. note: a vdpbf16ps form with the query and
  // probabilities in three exact bf16 parts ran at 0.7x these fp32 FMAs over rows widened as
  // they load (Zen 5, kernels_bench BM_AttendRowsBf16, 2026-12-07) and was removed.
  AttendRowsBf16Fn attend_rows_bf16 = nullptr;
  // The parts of attend_rows over consecutive segments of a key set, in key order, combined as
  // one call over all of them would: the same bits, in every table.
  AttendCombineFn attend_combine = nullptr;
  // The DSA indexer's scores of one query over n keys in panels (attention_kernels.h):
  //   out[t] = Σ_h w[h] · max(scale · q[h, Di]·k_t, 0), heads summed in order.
  IndexerScoresFn indexer_scores = nullptr;
  // indexer_scores over bf16 panels in place (one pointer per kIndexerPanel positions): the
  // same bits as over the panels widened to fp32.
  IndexerScoresBf16Fn indexer_scores_bf16 = nullptr;
  // out[k] = the positions of the k largest scores[n] (ties → lower position), ascending.
  // `scratch` holds TopKSetScratch(n) int32s. REQUIRES: k <= n; no NaN scores.
  TopKSetFn topk_set = nullptr;
  // y[M, r0..r1) = x · Wᵀ with W FP8 e4m3 (one fp32 scale per 128 × 128 block) packed in
  // 16-row groups (kernels/fp8.h), x taken as bf16_activations says.
  GemmFp8Fn gemm_fp8 = nullptr;
};

// The table for one level; nullptr when that level is not compiled in or the CPU lacks it.
const KernelTable* GetKernelTable(KernelLevel level);
// `t` with gemm_bf16 (and gemm_fp8) taking its activations as `a` (the same level's other entries
// unchanged). REQUIRES: t is a table GetKernelTable handed out (or one this function returned).
const KernelTable& WithGemmActivations(const KernelTable& t, GemmActivations a);
// The `--kernels` and `--gemm-activations` flags, parsed where they are read: "" (nullopt: this
// CPU's best) or ref|avx2|avx512, and fp32|bf16. An error names the flag and the value.
Result<std::optional<KernelLevel>> ParseKernelLevel(std::string_view name);
Result<GemmActivations> ParseGemmActivations(std::string_view name);
// The table for those flags: `level` nullopt (SelectKernels()) or a level this CPU and build
// have (else an error naming it), with gemm_bf16 taking `activations`.
Result<const KernelTable*> ResolveKernels(std::optional<KernelLevel> level,
                                          GemmActivations activations);
// The best level this CPU supports whose entries pass KernelSelfTest (decided once, at the
// first call; `MX_KERNELS=ref` in the environment caps it).
const KernelTable& SelectKernels();
// Runs every entry of `t` on fixed inputs (partial tiles and vectors, ties, -inf) against the
// ref table; "" when all agree within fp32 reordering, else the first failing entry's name.
std::string KernelSelfTest(const KernelTable& t);

// Threaded GEMM wrappers: split N over the pool (each worker gets a contiguous block of W rows).
// Poison y with NaN first, so a kernel that skips an element is caught by the finite checks.
void GemmBf16(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
              const uint16_t* w, int64_t n, float* y, GemmTiling t = {});
void GemmF32(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
             const float* w, int64_t n, float* y, GemmTiling t = {});

}  // namespace mx
