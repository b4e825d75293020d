// The GLM-5-class model on CPU: config + mapped checkpoint + weights, and one Forward that runs
// a ForwardBatch (prefill, decode or a mix, several sequences) through embedding, the decoder
// layers (RMSNorm, MLA + DSA indexer with IndexShare, dense FFN or MoE), the final norm and
// lm_head, and optionally the MTP layer. Math: ../shared/reference/glm-moe-dsa.md §3;
// conventions: tests/data/README.md.
// Legend: T rows (new tokens of all sequences), D hidden_size, V vocab_size.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_store.h"
#include "model/weights.h"

namespace mx {

// Thread-safety: Forward is const and may run concurrently on distinct KvStores and pools.
class Model {
 public:
  // Reads <dir>/config.json, opens the checkpoint in `dir`, checks every tensor against the
  // config (all problems in one Status) and loads the weights.
  // `adjust`, when set, edits the parsed config before the weights are checked (tests and
  // experiments, e.g. raising index_topk; it must not change any tensor shape).
  static Result<std::unique_ptr<Model>> Load(
      const std::string& dir, const std::function<void(ModelConfig&)>& adjust = nullptr);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Runs the batch: writes each sequence's KV rows at positions start_pos.. and reads rows
  // 0..p. REQUIRES: positions < start_pos of each sequence were written by earlier calls.
  // Errors: InvalidArgument for a bad token id, empty sequence, repeated sequence or MTP
  // request without an MTP layer; the KvStore's Reserve errors; Internal when a non-finite
  // value appears (naming the layer).
  Result<ForwardOutput> Forward(const ForwardBatch& batch, const ForwardOptions& opts, KvStore& kv,
                                const KernelTable& kt, ThreadPool& pool) const;

 private:
  Model(ModelConfig config, Checkpoint ckpt) : config_(std::move(config)), ckpt_(std::move(ckpt)) {}

  ModelConfig config_;
  Checkpoint ckpt_;
  ModelWeights weights_;  // views into ckpt_
};

}  // namespace mx
