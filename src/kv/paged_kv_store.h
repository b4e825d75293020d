// The engine's KV memory: one slab of fixed-size pages (page_size tokens each). A page holds,
// for each of its token slots and every layer (num_hidden_layers, plus the MTP layer), the MLA
// row [kv_lora_rank latent | qk_rope_head_dim k_pe] and, on full-indexer layers, the indexer
// key [index_head_dim]. Rows are stored as fp32, bf16 or fp8 e4m3 (fn or fnuz) with one scale
// per layer: stored = sat(x / scale), read = stored · scale, the clamp saturating at ±max.
// A sequence's positions map to pages through its page table, which the owner (the engine)
// fills from a PagePool; Reserve only checks that the table covers the positions.
//
// Layout: mla_[page][layer][slot][mla_width], idx_[page][full layer][slot][index_width].
// Thread-safety: none; rows of distinct (seq, pos) may be written concurrently.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mmap.h"
#include "base/numerics.h"
#include "base/status.h"
#include "io/model_config.h"
#include "model/kv_store.h"

namespace mx {

// "auto" and "bf16"/"bfloat16" → kBf16; "fp8_e4m3" → kFp8E4M3Fn; "fp8_e4m3fnuz"; "f32"/"float32".
Result<KvCacheDtype> ParseKvCacheDtype(std::string_view name);
const char* KvCacheDtypeName(KvCacheDtype d);
int64_t KvCacheDtypeBytes(KvCacheDtype d);

class PagedKvStore final : public KvStore {
 public:
  // `layer_scales`: empty (all 1.0) or one per layer (num_hidden_layers + MTP).
  PagedKvStore(const ModelConfig& config, int64_t page_size, int64_t n_pages, KvCacheDtype dtype,
               std::vector<float> layer_scales = {});

  // KV bytes one token occupies across all layers.
  static int64_t BytesPerToken(const ModelConfig& config, KvCacheDtype dtype);

  int64_t page_size() const { return page_size_; }
  int64_t n_pages() const { return n_pages_; }
  int64_t n_layers() const { return n_layers_; }
  KvCacheDtype dtype() const { return dtype_; }
  const std::vector<float>& layer_scales() const { return scales_; }

  // The page table of `seq` (created empty on first use); position p lives in slot
  // p % page_size of page table[p / page_size].
  std::vector<int32_t>& PageTable(int64_t seq) { return tables_[seq]; }
  void RemoveSequence(int64_t seq) { tables_.erase(seq); }
  int64_t PageCount(int64_t seq) const {
    auto it = tables_.find(seq);
    return it == tables_.end() ? 0 : static_cast<int64_t>(it->second.size());
  }

  Status Reserve(int64_t seq, int64_t n_positions) override;
  void WriteMlaRow(int64_t seq, int64_t layer, int64_t pos, const float* row) override;
  void ReadMlaRow(int64_t seq, int64_t layer, int64_t pos, float* out) override;
  bool MlaRowsBf16(int64_t seq, int64_t layer, std::span<const int64_t> pos,
                   const uint16_t** out) override;
  void WriteIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, const float* row) override;
  void ReadIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, float* out) override;
  // True for a bf16 store whose page size is a multiple of kIndexerPanel: its pages hold the
  // indexer keys as panels (any other store keeps them as rows).
  bool IndexerPanelsBf16(int64_t seq, int64_t layer, int64_t n, const uint16_t** out) override;
  Result<KvPageLayout> PageLayout(std::span<const int64_t> seqs) const override;

 private:
  uint8_t* MlaPtr(int64_t seq, int64_t layer, int64_t pos);
  // Where element d of an indexer key row sits from IdxPage (the base of its page and layer):
  // rows (slot·Di + d) or, when panels_, panels of kIndexerPanel slots ([Di, kIndexerPanel]).
  uint8_t* IdxPage(int64_t seq, int64_t layer, int64_t pos);
  int64_t IdxOffset(int64_t slot, int64_t d) const;
  void Encode(const float* x, int64_t n, float scale, uint8_t* dst) const;
  void Decode(const uint8_t* src, int64_t n, float scale, float* x) const;

  int64_t page_size_, n_pages_, n_layers_, mla_width_, index_width_;
  KvCacheDtype dtype_;
  int64_t elem_;
  std::vector<int64_t> full_slot_;  // [n_layers] index among full-indexer layers, or -1
  int64_t n_full_ = 0;
  bool panels_;  // indexer keys as panels in each page (page_size % kIndexerPanel == 0)
  std::vector<float> scales_;  // [n_layers]
  PageBuffer mla_;             // zero pages until written: a large pool costs nothing at start
  PageBuffer idx_;
  std::unordered_map<int64_t, std::vector<int32_t>> tables_;
};

}  // namespace mx
