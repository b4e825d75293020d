// Where the forward pass keeps each sequence's attention state, per layer and position:
//   MLA row     [kv_lora_rank latent c (post kv_a_layernorm) | qk_rope_head_dim k_pe (post RoPE)]
//   indexer key [index_head_dim] (post LayerNorm + RoPE), on full-indexer layers only
// Layers are 0..num_hidden_layers; the last one is the MTP layer (its own rows, same positions).
// Prefill and decode share one forward: both write rows at their positions and read rows
// 0..p. KvStore is the interface; ContiguousKvStore is the simple fp32 one-buffer-per-sequence
// implementation; kv/paged_kv_store.h is the engine's paged one (bf16 or fp8 rows).
// Rows go in and come out as fp32 through Write*/Read*: a store may keep them in a narrower
// dtype, so a row read back may differ from the row written by that dtype's rounding.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"

namespace mx {

// How a store keeps its rows (kv/paged_kv_store.h has the names and byte sizes).
enum class KvCacheDtype { kF32, kBf16, kFp8E4M3Fn, kFp8E4M3Fnuz };

// Where a paged store puts rows: its geometry and the page table of each sequence asked for.
// Enough for another tensor-parallel rank to build a store of its own in which the same
// (seq, pos) lands in the same page slot (engine/tp_runner.cpp mirrors the driver's store).
struct KvPageLayout {
  int64_t page_size = 0;
  int64_t n_pages = 0;
  KvCacheDtype dtype = KvCacheDtype::kBf16;
  std::vector<float> layer_scales;           // [layers]
  std::vector<std::vector<int32_t>> tables;  // [seqs] page ids, position p in table[p / page]
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Makes positions [0, n_positions) of `seq` addressable on every layer.
  // Errors: ResourceExhausted when the store cannot hold that many; NotFound for an unknown seq.
  virtual Status Reserve(int64_t seq, int64_t n_positions) = 0;
  // REQUIRES: Reserve(seq, > pos) succeeded. `row` / `out` hold mla_cache_values floats.
  // Rows of distinct (seq, pos) may be written concurrently; reads may run concurrently with
  // each other (the forward reads a layer's rows on the pool).
  virtual void WriteMlaRow(int64_t seq, int64_t layer, int64_t pos, const float* row) = 0;
  virtual void ReadMlaRow(int64_t seq, int64_t layer, int64_t pos, float* out) = 0;
  // Where the MLA rows of positions pos[0..n) of (seq, layer) sit, in place, when the store
  // keeps them as bf16 values (mla_cache_values each): writes out[0..n) and returns true; false
  // (nothing written) for a store of another dtype, whose rows ReadMlaRow widens. The pointers
  // stay valid until the next Reserve of seq or its removal. REQUIRES: Reserve(seq, > pos[i]).
  virtual bool MlaRowsBf16(int64_t seq, int64_t layer, std::span<const int64_t> pos,
                           const uint16_t** out) {
    (void)seq, (void)layer, (void)pos, (void)out;
    return false;
  }
  // REQUIRES: additionally, `layer` is a full-indexer layer; index_head_dim floats.
  virtual void WriteIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, const float* row) = 0;
  virtual void ReadIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, float* out) = 0;
  // The indexer keys of positions [0, n) of (seq, layer) in place as bf16 panels
  // (attention_kernels.h: [index_head_dim, kIndexerPanel] per kIndexerPanel positions; lanes
  // past n hold anything): writes out[0 .. ⌈n / kIndexerPanel⌉) and returns true when the store
  // keeps them so; false (nothing written) otherwise, and the caller reads rows. Valid as
  // MlaRowsBf16's pointers. REQUIRES: as ReadIndexerKeyRow, for every position < n.
  virtual bool IndexerPanelsBf16(int64_t seq, int64_t layer, int64_t n, const uint16_t** out) {
    (void)seq, (void)layer, (void)n, (void)out;
    return false;
  }

  // The layout that holds `seqs` (an unknown sequence has an empty table).
  // Errors: FailedPrecondition for a store that is not paged (the default).
  virtual Result<KvPageLayout> PageLayout(std::span<const int64_t> seqs) const;
};

// Thread-safety: none (one forward at a time; rows of distinct sequences may be written in
// parallel once reserved).
class ContiguousKvStore final : public KvStore {
 public:
  // Every sequence may hold up to `max_positions` tokens.
  ContiguousKvStore(const ModelConfig& config, int64_t max_positions);

  int64_t AddSequence();  // returns the new sequence id
  void RemoveSequence(int64_t seq);

  Status Reserve(int64_t seq, int64_t n_positions) override;
  void WriteMlaRow(int64_t seq, int64_t layer, int64_t pos, const float* row) override;
  void ReadMlaRow(int64_t seq, int64_t layer, int64_t pos, float* out) override;
  void WriteIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, const float* row) override;
  void ReadIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, float* out) override;

  // Direct access to the fp32 rows (tests). A pointer is valid until the next Reserve or
  // removal of that sequence.
  float* MlaRow(int64_t seq, int64_t layer, int64_t pos);
  float* IndexerKeyRow(int64_t seq, int64_t layer, int64_t pos);

 private:
  struct Sequence {
    int64_t reserved = 0;
    std::vector<std::vector<float>> mla;      // [layers][reserved · mla_width]
    std::vector<std::vector<float>> indexer;  // [layers][reserved · index_head_dim], full only
  };
  Sequence& Get(int64_t seq);

  int64_t n_layers_;  // num_hidden_layers + MTP
  int64_t mla_width_;
  int64_t index_width_;
  int64_t max_positions_;
  std::vector<bool> full_;  // [n_layers_]
  int64_t next_id_ = 0;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
};

}  // namespace mx
