// `mxserve tune moe`: times every valid MoeKernelConfig for one MoE shape and weight dtype on
// synthetic data, per tokens-per-step bucket, and returns the table the engine loads
// (tune/moe_tuning.h).
//
// Synthetic data: random weights (bf16 ~ N(0, 1/fan_in), or MXFP4 with random codes and E8M0
// scales near 2^-4), activations ~ N(0, 1), and routing drawn per token as k distinct experts
// uniformly from all E (weights uniform, normalized, × 2.5). Routing over the full E keeps the
// number of active experts and the rows per expert exactly those of the real shape.
//
// Representative subset: when all E experts' weights exceed `max_expert_bytes`, only S experts
// are allocated (the most that fit, at least k + 1) and routed expert e runs on the weights of
// physical expert e mod S. Each expert's weights are read from memory exactly as a distinct
// expert's would be, as long as one expert exceeds the last-level cache (GLM-5.2: 75 MB bf16,
// 20 MB MXFP4 per expert).
//
// Checks: before timing, every candidate's output for the first `check_rows` tokens must match
// the scalar ref kernels' (default config) within `CheckTolerance(dtype)` of the reference's
// largest magnitude, and its output for all tokens must match the default candidate's within
// the same bound. A candidate that fails is an error (a kernel bug), not skipped.
// Legend: T tokens per step (bucket), D model_dim, F moe_inter, E experts, k topk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "tune/moe_tuning.h"

namespace mx::tune {

// The candidates for one bucket (the default config first): split × fuse (columns only) ×
// row tile × column block × token tile, keeping only choices that can change the loop order at
// this T (row tiles need T >= 2, column blocks T >= 2, token tiles T > 64); the ref level has
// no tiling, and `experts` needs more than one thread.
std::vector<MoeKernelConfig> EnumerateMoeCandidates(const MoeShape& shape, const std::string& dtype,
                                                    KernelLevel level, int64_t tokens, int threads);

// Max abs error allowed vs the reference, as a fraction of the reference's max |value|:
// bf16 / f32 1e-4 (fp32 summation order only), mxfp4 2e-2 (an int8 rounding of the SwiGLU
// output may flip, mxfp4_test.cpp's kQ8Tol).
double CheckTolerance(const std::string& dtype);

struct MoeTuneOptions {
  MoeShape shape;
  std::string dtype = "mxfp4";  // bf16 | mxfp4
  std::vector<int64_t> tokens;  // buckets, ascending
  int warmup = 1;
  int repeats = 5;
  int64_t max_expert_bytes = int64_t{2} << 30;
  int64_t check_rows = 4;
  uint64_t seed = 1;
  // Before each timed run, read a buffer of base/bandwidth.h StreamBytes() (4× the last-level
  // cache) through the pool, so that the run reads its experts from memory as a forward step
  // does (the rest of the step evicts them). Without it a small bucket's few experts stay
  // cached across repeats: the 1-token bucket of the GLM-5.2 MXFP4 shape (235 MB of routed +
  // shared experts) timed 2.7-3.9 ms, faster than memory can deliver them (~87 GB/s on a
  // 55 GB/s host); with it 5.2-5.8 ms. Not with time_us (a cost model needs no cold cache).
  // `mxserve tune moe` sets it unless --warm-caches; off here so that a library caller (a test)
  // does not read gigabytes per run.
  bool flush_caches = false;
  std::string command;  // recorded in the file
  // Times one run of a candidate: calls `run` (the candidate's MoE block, `tokens` rows) and
  // returns microseconds. Null: the wall clock around run(). Tests inject a cost model here.
  std::function<double(const MoeKernelConfig& c, int64_t tokens, const std::function<void()>& run)>
      time_us;
};

struct MoeTuneProgress {
  int64_t tokens;        // bucket being timed
  int64_t candidate;     // 1-based within the bucket
  int64_t candidates;    // in this bucket
  double fraction_done;  // of the whole run, estimated
  double elapsed_s;
  std::string config;  // MoeConfigString of the candidate just timed
  double median_us;
};

// Runs the whole tune. Errors: InvalidArgument for a bad dtype, shape or bucket list, or a
// subset budget below k + 1 experts; Internal naming the candidate and bucket when a
// candidate's output fails the check.
Result<MoeTuneTable> TuneMoe(const MoeTuneOptions& o, const KernelTable& kt, ThreadPool& pool,
                             const std::function<void(const MoeTuneProgress&)>& progress);

}  // namespace mx::tune
