// `mxserve quantize`: a bf16 Hugging Face checkpoint → an MXFP4 checkpoint in AMD Quark's
// layout (W.weight uint8 [out, in/2], W.weight_scale uint8 [out, in/32], quantization_config
// with quant_method "quark" and the exclude list of every 2-d weight left unquantized), or → an
// FP8 block-scaled checkpoint in the DeepSeek-V3 / HF layout (--format fp8: W.weight F8_E4M3
// [out, in], W.weight_scale_inv F32 [ceil(out/128), ceil(in/128)], quantization_config
// {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size":
// [128, 128]}). An FP8 checkpoint is also an input for --format mxfp4: its weights chosen for
// MXFP4 are dequantized per block first, the rest stay FP8 (a mixed checkpoint).
//
// Streaming: tensors are produced one at a time while the safetensors writer writes them, so
// peak memory is about one tensor plus its output (input stays memory-mapped). Quantizing a
// tensor is split over rows on a thread pool. Everything is written under a temporary sibling
// of OUT_DIR that is renamed into place only when complete; any failure removes it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "quant/mxfp4.h"

namespace mx::quant {

struct QuantizeProgress {
  int64_t tensors_done = 0, tensors_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;  // input bytes
  std::string current;                       // last tensor written
};

struct QuantizeOptions {
  std::string format = "mxfp4";  // quant/quant_format.h
  ScaleMode scale_mode = ScaleMode::kEven;
  std::vector<std::string> exclude;  // extra patterns kept bf16 (exact, glob, re:)
  std::vector<std::string> include;  // extra patterns quantized (2-d weights only)
  uint64_t max_shard_bytes = 5'000'000'000;
  bool overwrite = false;
  int threads = 0;                                        // 0 = one per core
  std::function<void(const QuantizeProgress&)> progress;  // after each tensor
};

struct QuantizeSummary {
  int64_t n_quantized = 0;
  int64_t n_kept = 0;
  uint64_t in_bytes = 0;
  uint64_t out_bytes = 0;
  std::vector<std::string> exclude;  // written into quantization_config
  int num_shards = 1;
};

// The default MXFP4 recipe: only routed-expert projections
// (model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight) are quantized.
bool IsRoutedExpertWeight(const std::string& tensor_name);
// The default FP8 recipe: every 2-d weight but the embedding, lm_head, the MoE router, the
// indexer's weights_proj and the MTP layer's eh_proj / shared_head.head.
bool IsFp8DefaultWeight(const std::string& tensor_name);

// Errors (nothing is left at OUT_DIR or beside it): AlreadyExists when OUT_DIR exists without
// `overwrite`; InvalidArgument naming the tensor for a non-bf16/f32 tensor that would be
// quantized, an in-dimension not divisible by 32, or a NaN/Inf value; the reader's and
// writer's errors.
Result<QuantizeSummary> QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                           const QuantizeOptions& opts);

// "5GB", "500MB", "1.5GiB", "123" (bytes). Decimal units (KB/MB/GB/TB = 10^3..), binary with i.
Result<uint64_t> ParseByteSize(const std::string& text);

}  // namespace mx::quant
