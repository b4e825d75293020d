// The memory plan of a model to serve, made before anything is loaded: from config.json and the
// safetensors headers alone (no tensor data is read), what each rank will hold — its weights by
// format and where they live (model/weight_plan.h), its copy of the KV pool (bytes per token by
// --kv-cache-dtype × the token budget) and its activation scratch — and what this process holds
// in total against the memory available. `serve` logs it at every start, prints it with
// --dry-run (--json: docs/serving.md lists the fields) and refuses to load a plan that does not
// fit, naming the flags that would make it fit (CheckPlansFit).
//
// Who holds what: every tensor-parallel rank (--tp / --ep) holds its shard of the weights and a
// whole copy of the KV pool (MLA's latent cache is shared by every head, model/shard.h); every
// data-parallel replica (--dp) holds all of its ranks. In one process (threads) the process
// holds dp × tp ranks; under mpirun each process is one rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/weight_plan.h"

namespace mx {

// What `serve` was asked for (its flags with sglang's names).
struct MemoryPlanOptions {
  std::string model_dir;
  std::string model_name;  // for messages ("" = model_dir)
  int tp = 1;              // ranks of the tensor- / expert-parallel group
  bool expert_parallel = false;
  int dp = 1;         // replicas in this process
  int mpi_rank = -1;  // >= 0: the ranks are the processes of mpirun and this is that rank
  std::string kv_cache_dtype = "auto";
  int64_t max_total_tokens = 0;  // per KV copy; 0 = from mem_fraction of the available memory
  double mem_fraction = 0.3;     // --mem-fraction-static
  int64_t page_size = 64;
  int64_t chunked_prefill_size = 512;
  int32_t max_running_requests = 64;
  int threads = 0;  // the forward's threads in total (0 = one per core)
  // The memory available to this model: MemAvailable less what the models before it hold.
  // Unknown (nullopt): the automatic KV budget assumes 8 GiB, as the engine does.
  std::optional<int64_t> available_bytes;
};

// One layer's KV row per token.
struct KvLayerPlan {
  int64_t layer = 0;  // num_hidden_layers = the MTP layer
  bool mtp = false;
  int64_t latent_values = 0;   // kv_lora_rank
  int64_t rope_values = 0;     // qk_rope_head_dim
  int64_t indexer_values = 0;  // index_head_dim on full-indexer layers, else 0
  int64_t bytes_per_token = 0;
};

struct KvPlan {
  std::string dtype;  // resolved: bf16, fp8_e4m3, fp8_e4m3fnuz, f32
  int64_t dtype_bytes = 0;
  std::vector<KvLayerPlan> layers;  // main layers, then the MTP layer
  int64_t bytes_per_token = 0;      // their sum (= PagedKvStore::BytesPerToken)
  bool automatic = false;           // tokens from --mem-fraction-static
  int64_t page_size = 0;
  int64_t pages = 0;
  int64_t tokens = 0;  // pages × page_size: one copy's capacity
  int64_t bytes = 0;   // one copy: tokens × bytes_per_token
};

// One tensor-parallel rank of one replica (every replica's ranks hold the same).
struct RankPlan {
  int tp_rank = 0;
  WeightPlan weights;
  int64_t kv_bytes = 0;       // its KV copy
  int64_t scratch_bytes = 0;  // activations of its largest step (an estimate)
  int64_t total_bytes() const { return weights.anon_bytes + kv_bytes + scratch_bytes; }
};

struct MemoryPlan {
  MemoryPlanOptions options;
  std::string architecture;
  KvPlan kv;
  std::vector<RankPlan> ranks;  // tp ranks 0..tp-1 (under MPI: this process's rank only)
  int dp = 1;
  bool mpi = false;
  int64_t scratch_rows = 0;     // rows of the largest step the scratch is sized for
  int64_t process_bytes = 0;    // what this process holds once loaded (weights + KV + scratch)
  int64_t weights_bytes = 0;    // ... of which weights (anonymous memory)
  int64_t mapped_bytes = 0;     // weights used in place from the mapped file (not resident)
  int64_t load_peak_bytes = 0;  // during the load: weights + the largest transient copy
};

// The plan. Errors: config.json or the checkpoint unreadable, the checks the loader makes
// before reading data (weight_plan.h), a bad --kv-cache-dtype or a page size < 1.
Result<MemoryPlan> PlanMemory(const MemoryPlanOptions& options);

// KV tokens from a fraction of the available memory (the engine's automatic budget):
// mem_fraction × available / bytes_per_token, at most `cap` (every running request at full
// context).
int64_t AutoKvTokens(double mem_fraction, int64_t available, int64_t bytes_per_token, int64_t cap);

// The plan as text for the log and --dry-run: one line per weight format, the KV row per layer
// kind, the ranks and the total.
std::string DescribePlan(const MemoryPlan& plan);

// Whether the plans (every model this process serves) fit `available` bytes. Errors:
// ResourceExhausted naming the model, what it needs and the flags that would make it fit
// (--max-total-tokens with the largest budget that fits, --kv-cache-dtype fp8_e4m3, --tp over
// mpirun, --dp, --mem-fraction-static).
Status CheckPlansFit(const std::vector<MemoryPlan>& plans, int64_t available);

}  // namespace mx
