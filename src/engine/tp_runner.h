// The tensor / expert parallel ModelRunner (`--tp N`, `--ep N`): N model shards
// (model/shard.h) that run every forward together, one all-reduce per row-parallel layer.
//
// Rank 0 is the driver: the engine loop thread calls it like any runner. For each forward it
// broadcasts a step (the batch, and each sequence's page table so that every rank's copy of
// the KV cache — MLA keeps the whole latent cache on every rank — uses the same pages), then
// runs its own shard. Ranks 1..N-1 are workers (RunTpWorker): they receive the step, mirror
// the page tables into a PagedKvStore of their own with the driver's geometry, run their
// shard and drop the output (the logits are all-gathered, so rank 0 holds them whole).
// The same protocol runs over the in-process communicator (workers are threads of this
// process: MakeInProcessTpRunner) and over MPI (workers are the other `mpirun` processes, each
// running `mxserve serve` that calls RunTpWorker).
//
// Failure: a collective that fails (a rank died, the MPI runtime failed, the in-process group
// was aborted) makes the forward return Unavailable, which the engine treats as fatal: every
// request ends with the error and /health turns 503 (model_runner.h). No rank waits forever:
// in process the dying rank aborts the group; under MPI the runtime (mpirun) ends the job.
//
// Thread-safety: a runner is called from one thread (the engine loop).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model_runner.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/communicator.h"
#include "tune/moe_tuning.h"

namespace mx {

// Rank 0 of a group over `comm` (REQUIRES: comm.rank() == 0, comm outlives the runner, `shard`
// loaded with ModelShard{0, comm.size(), ...}). The destructor tells the workers to stop.
std::unique_ptr<ModelRunner> MakeTpDriverRunner(std::unique_ptr<Model> shard, Communicator& comm,
                                                const KernelTable& kt, int threads, MoeTuning moe);

// A worker rank: serves the driver's steps until it says stop (Ok) or a collective fails (that
// error). Per-batch errors (the driver gets the same) are logged and the loop goes on.
Status RunTpWorker(const Model& shard, Communicator& comm, const KernelTable& kt, int threads,
                   const MoeTuning& moe);

// A group of threads of this process: `shards[r]` is rank r (loaded with ModelShard{r, N, ...});
// rank 0 drives, ranks 1.. run RunTpWorker on threads of their own; `threads` (0 = one per
// core) are split between the ranks. Errors: InvalidArgument for fewer than 2 shards or shards
// that are not ranks 0..N-1 of one group.
class InProcessTpRunner : public ModelRunner {
 public:
  static Result<std::unique_ptr<InProcessTpRunner>> Create(
      std::vector<std::unique_ptr<Model>> shards, const KernelTable& kt, int threads,
      MoeTuning moe);
  // Test hook: rank `rank` (> 0) stops as if it died — it aborts the group with `reason`, so
  // the driver's next forward fails with Unavailable instead of waiting for it.
  virtual void FailRank(int rank, const std::string& reason) = 0;
};

}  // namespace mx
