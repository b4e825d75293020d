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
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/kv_store.h"
#include "model/weights.h"

namespace mx {

struct LayerContext;  // model/layer_context.h

// Thread-safety: Forward is const and may run concurrently on distinct KvStores and pools.
class Model {
 public:
  // Reads <dir>/config.json, opens the checkpoint in `dir`, checks every tensor against the
  // config (all problems in one Status) and loads the weights.
  // `adjust`, when set, edits the parsed config before the weights are checked (tests and
  // experiments, e.g. raising index_topk; it must not change any tensor shape).
  // `shard`: load only this rank's part for tensor / expert parallelism (model/shard.h); its
  // forwards then need ForwardOptions::comm of the group, every rank running the same batches.
  static Result<std::unique_ptr<Model>> Load(
      const std::string& dir, const std::function<void(ModelConfig&)>& adjust = nullptr,
      const ModelShard& shard = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // FP8 KV-cache scales from the checkpoint, one per layer incl. MTP (model/kv_scales.h), or
  // empty when it has none.
  const std::vector<float>& kv_scales() const { return kv_scales_; }

  // Runs the batch: writes each sequence's KV rows at positions start_pos.. and reads rows
  // 0..p. REQUIRES: positions < start_pos of each sequence were written by earlier calls.
  // Errors: InvalidArgument for a bad token id, empty sequence, repeated sequence or MTP
  // request without an MTP layer; the KvStore's Reserve errors; Internal when a non-finite
  // value appears (naming the layer).
  Result<ForwardOutput> Forward(const ForwardBatch& batch, const ForwardOptions& opts, KvStore& kv,
                                const KernelTable& kt, ThreadPool& pool) const;

  // The MTP layer alone over `batch` (speculative drafting, see MtpBatch): writes the MTP
  // layer's KV (and, unless the batch gives top-k sets, indexer key) rows at the rows'
  // positions. Errors: InvalidArgument for a model without an MTP layer, bad ids, rows or
  // shapes; the KvStore's Reserve errors; Internal for a non-finite value.
  // `moe` and `comm` as ForwardOptions::moe and ::comm.
  Result<MtpOutput> ForwardMtp(const MtpBatch& batch, KvStore& kv, const KernelTable& kt,
                               ThreadPool& pool, const MoeKernelConfig& moe = DefaultMoeConfig(),
                               Communicator* comm = nullptr) const;

  const ModelShard& shard() const { return weights_.shard; }

 private:
  // logits [n, V] = x [n, D] · lm_headᵀ (vocab-parallel shards gather their blocks).
  Status LmHead(const LayerContext& ctx, const float* x, int64_t n,
                std::vector<float>& logits) const;

  // §3.11 over ctx's rows: (h[i], next[i]) -> hidden [R, D] (post shared_head.norm) and
  // logits [R, V] (or only of the rows in `logit_rows`, when not null); `topk` is the MTP
  // indexer's selection (given when reuse_topk).
  Status MtpLayer(const LayerContext& ctx, const std::vector<int32_t>& next,
                  const std::vector<const float*>& h, std::vector<int32_t>& topk, bool reuse_topk,
                  RouterChoice* trace, std::vector<float>& hidden, std::vector<float>& logits,
                  const std::vector<int64_t>* logit_rows = nullptr) const;

  Model(ModelConfig config, Checkpoint ckpt) : config_(std::move(config)), ckpt_(std::move(ckpt)) {}

  ModelConfig config_;
  Checkpoint ckpt_;
  ModelWeights weights_;  // views into ckpt_
  std::vector<float> kv_scales_;
};

}  // namespace mx
