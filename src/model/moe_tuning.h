// Tuned MoE kernel configs: the knobs of the MoE block (how its expert GEMMs are split over the
// thread pool, whether gate and up run in one pass, the GEMM tiling, the token tile), one best
// choice per tokens-per-step bucket, stored as JSON files named
// `<dtype>-<shape>-<isa>.json` (bf16-d2048-f768-e32-k8-s1-avx512.json) that `mxserve tune moe`
// writes and the engine looks up at load. A shape without a file runs the heuristic default
// (DefaultMoeConfig) and says so once, with the command that tunes it.
//
// File format (version 1):
//   {"format": "mxserve-moe-tune", "version": 1, "dtype": "bf16", "isa": "avx512",
//    "shape": {"model_dim": 2048, "moe_inter": 768, "E": 32, "topk": 8, "shared": 1},
//    "threads": 2, "experts_allocated": 32, "command": "mxserve tune moe ...",
//    "buckets": [{"tokens": 1, "best": {"split": "batched", "fuse_gate_up": true, "mr": 1,
//                 "nb": 0, "token_tile": 0}, "best_us": 812.5, "default_us": 1490.2,
//                 "candidates": 12}, ...]}
// Legend: D model_dim (hidden_size), F moe_inter (moe_intermediate_size), E n_routed_experts,
// k topk (num_experts_per_tok), T rows of one forward.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"
#include "kernels/gemm_tiling.h"
#include "kernels/kernels.h"

namespace mx {

// How the expert MLPs of one MoE block share the thread pool.
enum class MoeSplit {
  kColumns,  // expert by expert, each GEMM split over the pool by output columns (pre-tuning)
  kBatched,  // every active expert's gate/up columns in one parallel pass, then every down
  kExperts,  // whole experts per worker (balanced by rows), each GEMM single-threaded
};
const char* MoeSplitName(MoeSplit s);  // "columns", "batched", "experts"

struct MoeKernelConfig {
  MoeSplit split = MoeSplit::kColumns;
  bool fuse_gate_up = false;  // kColumns: gate, up and SiLU·up in one parallel pass
  GemmTiling tiling;          // every expert GEMM (gate, up, down)
  int64_t token_tile = 0;     // rows of one expert per pass; 0 = all its rows at once

  bool operator==(const MoeKernelConfig&) const = default;
};
// "split=batched fuse=1 mr=2 nb=64 tt=0".
std::string MoeConfigString(const MoeKernelConfig& c);
// What runs without a tuned config: exactly the MoE block's behaviour before tuning existed
// (expert by expert, column-split GEMMs, the kernels' default tiling).
MoeKernelConfig DefaultMoeConfig();

struct MoeShape {
  int64_t model_dim = 0, moe_inter = 0, n_experts = 0, topk = 0, n_shared = 0;
  bool operator==(const MoeShape&) const = default;
};
MoeShape MoeShapeOf(const ModelConfig& c);
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
  std::string file;     // the config file in use (tuned), or the name that was looked for
  std::string command;  // `mxserve tune moe ...` that makes the missing file (untuned)
  MoeTuneTable table;   // when tuned

  MoeKernelConfig For(int64_t rows) const { return tuned ? table.For(rows) : DefaultMoeConfig(); }
  const char* state() const { return !has_moe ? "none" : tuned ? "tuned" : "default"; }
};

// The repository's shipped configs (configs/moe/ in the source tree).
std::string ShippedMoeConfigDir();

// Looks for MoeTuneFileName(dtype, shape, isa) in ShippedMoeConfigDir(), then in `user_dir`
// (when not empty); the first that exists wins and must parse and match the shape, dtype and
// isa. With `log`: one INFO line naming the file, or (none found) ONE warning per (dtype,
// shape, isa) per process naming the shape and the exact `mxserve tune moe` command.
// Errors: InvalidArgument (file + field) for a file that exists but is malformed or describes
// another shape / dtype / isa.
Result<MoeTuning> ResolveMoeTuning(const MoeShape& shape, const std::string& dtype,
                                   const std::string& isa, const std::string& user_dir,
                                   bool has_moe = true, bool log = true);

// The `mxserve tune moe` command for a shape (buckets 1..512, `output_dir` when not empty).
std::string MoeTuneCommand(const MoeShape& shape, const std::string& dtype,
                           const std::string& output_dir);

}  // namespace mx
