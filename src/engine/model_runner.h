// What the scheduler needs from a model: its config and one forward over a batch that returns
// the logits of each sequence's last row. The real runner wraps Model + KernelTable +
// ThreadPool; tests substitute cheap fakes (engine_test_util.h) to drive the scheduler hard.
//
// Errors: a forward that fails with Unavailable or Aborted says the runner itself is broken
// (a tensor-parallel peer rank died, a collective was aborted): the engine fails for good
// (Engine::Health). Any other code is an error of that batch alone: its requests end with it
// and the engine goes on.
//
// Thread-safety: called from the engine loop thread only.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "tune/moe_tuning.h"

namespace mx {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  // Logits [batch.seqs.size(), vocab_size]: the last new row of every sequence.
  virtual Result<std::vector<float>> Forward(const ForwardBatch& batch, KvStore& kv) = 0;

  // Speculative decoding needs a model with an MTP layer and these two (the defaults fail):
  // the forward with logits for the last row of every sequence, or every row of those with
  // SequenceInput::all_logits (in row order), and the final hidden states [T, D] ...
  virtual Result<ForwardOutput> ForwardRows(const ForwardBatch& batch, KvStore& kv);
  // ... and one pass of the MTP layer alone (drafting).
  virtual Result<MtpOutput> ForwardMtp(const MtpBatch& batch, KvStore& kv);

  // The MoE kernel configs the forwards run with; null for runners without a real model.
  virtual const MoeTuning* moe_tuning() const { return nullptr; }
  // Threads a forward runs on; 0 where the runner does not say (fakes, parallel groups).
  virtual int threads() const { return 0; }
};

// True for the codes above that mean the runner is broken, not just the batch.
inline bool IsRunnerFailure(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kAborted;
}

// REQUIRES: kt outlives the runner. threads <= 0: one per core. `moe`: the MoE kernel configs
// (ResolveModelMoeTuning; the default-constructed value runs the untuned default).
std::unique_ptr<ModelRunner> MakeModelRunner(std::unique_ptr<Model> model, const KernelTable& kt,
                                             int threads, MoeTuning moe = {});

}  // namespace mx
