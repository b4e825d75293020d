// The input and output of one forward call: several sequences, each with its new tokens and
// the position of the first one (= tokens already in the KvStore). Prefill (many tokens),
// decode (one token) and verify (a few) are the same call.
//
// Rows: the new tokens of all sequences flattened in batch order; sequence s owns rows
// [row_begin[s], row_begin[s+1]). Legend: T rows, D hidden_size, V vocab_size, K index_topk,
// k num_experts_per_tok, L num_hidden_layers.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/moe_config.h"
#include "model/op_profile.h"

namespace mx {

struct SequenceInput {
  int64_t seq = 0;              // KvStore sequence id
  int64_t start_pos = 0;        // position of tokens[0]
  std::vector<int32_t> tokens;  // new tokens
  // Empty, or one id per token: x_{t+1} for MTP row t (the MTP layer then runs on
  // (final_hidden[t], mtp_next[t]) at position t and writes its own KV rows).
  std::vector<int32_t> mtp_next;
  // With LogitsMode::kLast: every row of this sequence gets logits, not only the last one
  // (speculative verification).
  bool all_logits = false;
};

struct ForwardBatch {
  std::vector<SequenceInput> seqs;
};

class Communicator;  // parallel/communicator.h

enum class LogitsMode { kNone, kLast, kAll };  // kLast: the last row of every sequence
// How MLA attends (glm-moe-dsa.md §3.4 / §3.5). kAuto: per sequence the form (or split: the
// rows within index_topk expanded, the rest absorbed) with the fewest multiply-adds (mla.cpp):
// absorbed for decode and small chunks after a long context, expanded for a long prompt.
enum class MlaForm { kAuto, kExpanded, kAbsorbed };

struct ForwardOptions {
  LogitsMode logits = LogitsMode::kLast;
  MlaForm mla_form = MlaForm::kAuto;
  bool dense_attention = false;     // ignore the indexer selection (plain causal attention)
  bool want_hidden_states = false;  // per-layer residual stream
  bool want_topk = false;           // indexer top-k sets per layer
  bool want_router = false;         // MoE expert choices per layer
  // The last decoder layer writes every row's KV (MLA latent, indexer key) but runs its queries,
  // attention and MLP for the logit rows only (LogitsMode::kLast): past the last layer's KV
  // writes only rows whose logits are read matter (llama.cpp-family engines skip the last
  // layer's MLP for the other rows). final_hidden is then empty. Ignored (every row runs) with
  // kAll, hidden states, top-k or router traces, or MTP rows in the batch. The logits agree
  // with the unpruned pass to fp32 rounding (a lone query row may take MLA's absorbed form).
  bool prune_last_layer = false;
  // How every MoE block of this forward runs its experts (the runner picks it for the batch's
  // row count from the tuned configs, tune/moe_tuning.h).
  MoeKernelConfig moe = DefaultMoeConfig();
  // This rank's group when the model is a shard (model/shard.h; not owned). REQUIRES: set, with
  // the shard's size, for a sharded model; every rank runs the same batch.
  Communicator* comm = nullptr;
  // Per-op wall time of this forward is added here when set (model/op_profile.h; not owned).
  OpProfile* profile = nullptr;
};

// Routed experts of each row (ascending) and their gate weights (after norm_topk_prob and
// routed_scaling_factor), [rows, k] each.
struct RouterChoice {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

struct ForwardOutput {
  std::vector<int64_t> row_begin;   // [n_seqs + 1]
  std::vector<int64_t> logit_rows;  // rows that `logits` holds, in order
  std::vector<float> logits;        // [logit_rows.size(), V]
  std::vector<float> final_hidden;  // [T, D] post-final-norm (the lm_head / MTP input); empty
                                    // when the last layer was pruned (prune_last_layer)
  std::vector<std::vector<float>> hidden_states;  // [L+1][T, D]: 0 = embedding, l+1 = after l
  std::vector<std::vector<int32_t>> topk;         // [L][T, K] ascending, -1 padded (shared: reused)
  std::map<int64_t, RouterChoice> router;         // MoE layer -> choices

  // MTP: rows of the sequences that gave mtp_next, in row order.
  std::vector<int64_t> mtp_rows;
  std::vector<float> mtp_logits;  // [mtp_rows.size(), V]
  std::vector<float> mtp_hidden;  // [mtp_rows.size(), D] after shared_head.norm
  std::vector<int32_t> mtp_topk;  // [mtp_rows.size(), K] (want_topk)
  RouterChoice mtp_router;        // (want_router)
};

// One pass of the MTP layer on its own (speculative draft steps and draft-extend, §3.11/§3.12).
// Row t of a sequence is the pair (h, x) at position start_pos + t: h the hidden state that
// precedes x (the target's final hidden at that position, or the previous draft step's
// MtpOutput::hidden), x the token that follows it. The layer writes its KV rows at those
// positions and predicts the token after x. Legend: R rows, D hidden_size, V vocab_size,
// K index_topk.
struct MtpSequenceInput {
  int64_t seq = 0;
  int64_t start_pos = 0;
  std::vector<int32_t> tokens;  // [R_s] x
  std::vector<float> hidden;    // [R_s, D] h
  // Empty, or [R_s, K]: use this indexer selection instead of running the MTP layer's indexer
  // (index_share_for_mtp_iteration: later draft steps reuse the first step's top-k).
  std::vector<int32_t> topk;
};

struct MtpBatch {
  std::vector<MtpSequenceInput> seqs;
  // Logits for each sequence's last row only (a draft-extend needs just the first draft; the
  // lm_head over every row would be most of the pass).
  bool last_logits = false;
};

struct MtpOutput {
  std::vector<int64_t> row_begin;  // [n_seqs + 1]
  std::vector<float> logits;       // [R, V], or [n_seqs, V] with MtpBatch::last_logits
  std::vector<float> hidden;       // [R, D] after shared_head.norm (the next step's h)
  std::vector<int32_t> topk;       // [R, K] the selection used (empty without an indexer)
};

}  // namespace mx
