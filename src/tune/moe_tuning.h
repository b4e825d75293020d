// Tuned MoE kernel config files: the knobs of the MoE block (model/moe_config.h: how its expert
// GEMMs are split over the thread pool, whether gate and up run in one pass, the GEMM tiling,
// the token tile), one best choice per tokens-per-step bucket, stored as JSON files named
// `<dtype>-<shape>-<isa>.json` (bf16-d2048-f768-e32-k8-s1-avx512.json) that `mxserve tune moe`
// writes and the model factory looks up at load. The repository's configs/moe/ files are built
// into the binary (moe_configs.cmake), so a binary finds them wherever it runs; a user's
// directory is searched after them. A shape without a file runs the default
// (DefaultMoeConfig); LogMoeTuning says which, with the command that tunes a missing one.
//
// File format (version 1):
//   {"format": "mxserve-moe-tune", "version": 1, "dtype": "bf16", "isa": "avx512",
//    "shape": {"model_dim": 2048, "moe_inter": 768, "E": 32, "topk": 8, "shared": 1},
//    "threads": 2, "experts_allocated": 32, "command": "mxserve tune moe ...",
//    "buckets": [{"tokens": 1, "best": {"split": "batched", "fuse_gate_up": true, "mr": 1,
//                 "nb": 0, "token_tile": 0}, "best_us": 812.5, "default_us": 1490.2,
//                 "candidates": 12}, ...]}
// Legend: T rows of one forward; the shape's letters as in model/moe_config.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/forward_batch.h"
#include "model/moe_config.h"

namespace mx {

// "d2048-f768-e32-k8-s1" (file names).
std::string MoeShapeName(const MoeShape& s);
// "model_dim=2048,moe_inter=768,E=32,topk=8,shared=1" (the --shape flag; shared defaults to 1).
std::string MoeShapeSpec(const MoeShape& s);
// Parses MoeShapeSpec's form. Errors: InvalidArgument naming the bad key or value.
Result<MoeShape> ParseMoeShape(std::string_view spec);

// The file a (dtype, shape, isa) is stored in: "<dtype>-<shape>-<isa>.json".
std::string MoeTuneFileName(const std::string& dtype, const MoeShape& s, const std::string& isa);

struct MoeTuneBucket {
  int64_t tokens = 0;  // tokens per step this entry was measured at
  MoeKernelConfig best;
  double best_us = 0;      // median time of `best` for one MoE block
  double default_us = 0;   // median time of DefaultMoeConfig()
  int64_t candidates = 0;  // how many valid candidates were timed
};

struct MoeTuneTable {
  std::string dtype;  // "bf16", "mxfp4", "f32"
  std::string isa;    // KernelLevelName
  MoeShape shape;
  int64_t threads = 0;
  int64_t experts_allocated = 0;  // distinct expert weights the tuner timed on (subset, see tune/)
  std::string command;            // the command that made the file
  std::vector<MoeTuneBucket> buckets;  // ascending tokens, at least one

  // The config for a forward of `rows` rows: the bucket nearest on a log scale (ties → the
  // smaller bucket). REQUIRES: !buckets.empty().
  const MoeKernelConfig& For(int64_t rows) const;
};

// Errors: InvalidArgument "<path>: <field>: <what is wrong>" for malformed JSON, a missing or
// mistyped field, an unknown split, an invalid tiling, or buckets not strictly ascending.
Result<MoeTuneTable> ParseMoeTuneTable(std::string_view text, const std::string& path);
Result<MoeTuneTable> LoadMoeTuneTable(const std::string& path);
std::string SerializeMoeTuneTable(const MoeTuneTable& t);  // pretty JSON, ParseMoeTuneTable's form

// The MoE config a loaded model runs with.
struct MoeTuning {
  bool has_moe = false;  // the model has MoE layers at all
  bool tuned = false;
  std::string dtype, isa;
  MoeShape shape;
  std::string file;      // the config file in use (tuned), or the name that was looked for
  std::string searched;  // where it was looked for (the built-in configs, the user's directory)
  std::string command;   // `mxserve tune moe ...` that makes the missing file (untuned)
  MoeTuneTable table;    // when tuned

  MoeKernelConfig For(int64_t rows) const { return tuned ? table.For(rows) : DefaultMoeConfig(); }
  // The config for a forward of this batch (the MoE block runs all its rows at once).
  MoeKernelConfig For(const ForwardBatch& b) const;
  MoeKernelConfig For(const MtpBatch& b) const;
  const char* state() const { return !has_moe ? "none" : tuned ? "tuned" : "default"; }
};

// The repository's configs/moe/*.json, built into the binary (name, contents).
struct ShippedMoeConfig {
  std::string_view name;
  std::string_view text;
};
const std::vector<ShippedMoeConfig>& ShippedMoeConfigs();
// How errors and logs name the built-in files ("<this>/<name>").
inline constexpr const char* kShippedMoeConfigs = "configs/moe (built in)";

// Looks for MoeTuneFileName(dtype, shape, isa) among ShippedMoeConfigs(), then in `user_dir`
// (when not empty); the first found wins and must parse and match the shape, dtype and isa.
// Logs nothing (LogMoeTuning does, once per load).
// Errors: InvalidArgument (file + field) for a file that exists but is malformed or describes
// another shape / dtype / isa.
Result<MoeTuning> ResolveMoeTuning(const MoeShape& shape, const std::string& dtype,
                                   const std::string& isa, const std::string& user_dir,
                                   bool has_moe = true);

// One line: INFO naming the tuned file in use, or a warning naming the missing file, where it
// was looked for and the exact `mxserve tune moe` command; nothing for a model without MoE.
void LogMoeTuning(const MoeTuning& m);

// The `mxserve tune moe` command for a shape (buckets 1..512, `output_dir` when not empty).
std::string MoeTuneCommand(const MoeShape& shape, const std::string& dtype,
                           const std::string& output_dir);

}  // namespace mx
