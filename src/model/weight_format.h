// Linear-weight formats as a table (ggml's type_traits_cpu idea): one descriptor per format a
// LinearWeight holds in memory — its block along the input, bytes per block, how it is loaded
// from a checkpoint tensor, read element-wise, sliced for tensor / expert parallelism, and
// multiplied (the threaded GEMM of Linear, the raw column-range kernel of the MoE). Loading
// (weights.cpp), the forward (Linear, the MoE's expert GEMMs), weight_bytes, the MoE tuning's
// dtype name and `inspect` look formats up here instead of branching per dtype; a quantized
// entry points to its checkpoint codec in quant/quant_format.h, which `mxserve quantize` writes
// with. A new format is one entry here and, if quantized, one there.
//
// Shape legend: n output rows, k input columns (W[n, k], HF [out, in]), m activation rows.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/fp8.h"
#include "kernels/gemm_tiling.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"
#include "model/weights.h"
#include "quant/quant_format.h"

namespace mx {

struct LinearFormat {
  const char* name;     // "bf16", "f32", "mxfp4", "fp8" (MoE tuning files, inspect)
  DType dtype;          // LinearWeight::dtype of this format (kU8 = MXFP4, kF8_E4M3 = FP8)
  int64_t block;        // elements per block along k: a column slice must be a multiple
                        // (FP8: or end at k, where the last block may be partial)
  int64_t block_bytes;  // bytes one block of one row occupies in the kernels' layout (codes +
                        // scale; FP8: codes only, its scales are shared by 128 rows)
  // The checkpoint dtypes stored in this format (f16 is widened to f32).
  std::span<const DType> file_dtypes;
  // A quantized format's checkpoint codec (quant/quant_format.h: the codes and scale tensors,
  // the row encoder `mxserve quantize` writes with), or null for a plain float format.
  const quant::QuantFormat* codec;
  // Activations the raw kernel takes: Q8 blocks (quantized per 32 values) instead of fp32 rows.
  bool q8_activations;
  // W rows the raw kernel computes together (MXFP4: a packed group of 16): gemm_cols ranges
  // should start and end at multiples of it — any other boundary is still correct, but the
  // group it cuts is computed by both sides.
  int64_t row_group;

  // W[n, k] from checkpoint tensor `v` (2-d, one of file_dtypes; `scale` the codec's scale
  // tensor when there is a codec, else null): a view into the mapping where the layout allows.
  LinearWeight (*load)(const TensorView& v, const TensorView* scale);
  // W[row, col] as fp32 (slow path).
  float (*at)(const LinearWeight& w, int64_t row, int64_t col);
  // Rows [first, first + count): a view (`copy` false) or owned copies (`copy` true).
  LinearWeight (*rows)(const LinearWeight& w, int64_t first, int64_t count, bool copy);
  // Columns [first, first + count), copied. REQUIRES: first and count multiples of `block`.
  LinearWeight (*cols)(const LinearWeight& w, int64_t first, int64_t count);
  // y[m, n] = x[m, k] · Wᵀ, threaded over n (the kernels' Gemm*).
  void (*gemm)(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
               const LinearWeight& w, float* y, GemmTiling t);
  // y[i·ldy + c] = x_i · W[c] for i < m and c in [c0, c1), the raw kernel on this thread; x as
  // fp32 rows [m, k] (`xf`) or, with q8_activations, Q8 blocks [m, k/32] (`xq`).
  void (*gemm_cols)(const KernelTable& kt, const LinearWeight& w, const float* xf,
                    const BlockQ8* xq, int64_t m, int64_t c0, int64_t c1, float* y, int64_t ldy,
                    GemmTiling t);
  // Bytes w occupies in memory (codes and scales), what a GEMM over it reads.
  int64_t (*bytes)(const LinearWeight& w);
};

// The descriptor of w's format. REQUIRES: w.dtype is one of the table's (kBF16, kF32, kU8,
// kF8_E4M3).
const LinearFormat& FormatOf(const LinearWeight& w);

// The format a checkpoint tensor of dtype `file_dtype` loads into, or null (integers other than
// MXFP4's codes, ...: not supported by the CPU forward).
const LinearFormat* FormatForFileDtype(DType file_dtype);

// W [n, k] from row-major bf16 (row stride ldw) in the loaded bf16 format (packed, owned): for
// weights made in code that should run as the loaded ones do (the MoE tuner, tests).
LinearWeight PackedBf16Weight(const uint16_t* w, int64_t ldw, int64_t n, int64_t k);

// Every format, in table order.
std::span<const LinearFormat> LinearFormats();

}  // namespace mx
