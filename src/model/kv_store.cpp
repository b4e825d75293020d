// ContiguousKvStore: one growable buffer per (sequence, layer).
#include "model/kv_store.h"

#include <algorithm>
#include <limits>

#include "base/check.h"

namespace mx {

Result<KvPageLayout> KvStore::PageLayout(std::span<const int64_t> seqs) const {
  return FailedPrecondition("this KV store has no pages to mirror (a paged store has)");
}

ContiguousKvStore::ContiguousKvStore(const ModelConfig& c, int64_t max_positions)
    : n_layers_(c.num_hidden_layers + (c.num_nextn_predict_layers > 0 ? 1 : 0)),
      mla_width_(c.mla_cache_values()),
      index_width_(c.index_head_dim),
      max_positions_(max_positions) {
  for (int64_t l = 0; l < n_layers_; ++l) full_.push_back(c.is_full_indexer_layer(l));
}

int64_t ContiguousKvStore::AddSequence() {
  const int64_t id = next_id_++;
  auto s = std::make_unique<Sequence>();
  s->mla.resize(n_layers_);
  s->indexer.resize(n_layers_);
  seqs_[id] = std::move(s);
  return id;
}

void ContiguousKvStore::RemoveSequence(int64_t seq) { seqs_.erase(seq); }

ContiguousKvStore::Sequence& ContiguousKvStore::Get(int64_t seq) {
  auto it = seqs_.find(seq);
  MX_CHECK_MSG(it != seqs_.end(), "unknown KV sequence");
  return *it->second;
}

Status ContiguousKvStore::Reserve(int64_t seq, int64_t n_positions) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return NotFound("KV sequence {} does not exist", seq);
  if (n_positions > max_positions_) {
    return ResourceExhausted("sequence {} needs {} positions; the KV store holds {} per sequence",
                             seq, n_positions, max_positions_);
  }
  Sequence& s = *it->second;
  if (n_positions <= s.reserved) return Status::Ok();
  // Poison fresh rows: reading a row that was never written shows up as NaN downstream.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t l = 0; l < n_layers_; ++l) {
    s.mla[l].resize(n_positions * mla_width_, nan);
    if (full_[l]) s.indexer[l].resize(n_positions * index_width_, nan);
  }
  s.reserved = n_positions;
  return Status::Ok();
}

float* ContiguousKvStore::MlaRow(int64_t seq, int64_t layer, int64_t pos) {
  Sequence& s = Get(seq);
  MX_CHECK_LT(pos, s.reserved);
  return s.mla[layer].data() + pos * mla_width_;
}

float* ContiguousKvStore::IndexerKeyRow(int64_t seq, int64_t layer, int64_t pos) {
  Sequence& s = Get(seq);
  MX_CHECK_LT(pos, s.reserved);
  MX_CHECK(full_[layer]);
  return s.indexer[layer].data() + pos * index_width_;
}

void ContiguousKvStore::WriteMlaRow(int64_t seq, int64_t layer, int64_t pos, const float* row) {
  std::copy_n(row, mla_width_, MlaRow(seq, layer, pos));
}

void ContiguousKvStore::ReadMlaRow(int64_t seq, int64_t layer, int64_t pos, float* out) {
  std::copy_n(MlaRow(seq, layer, pos), mla_width_, out);
}

void ContiguousKvStore::WriteIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos,
                                           const float* row) {
  std::copy_n(row, index_width_, IndexerKeyRow(seq, layer, pos));
}

void ContiguousKvStore::ReadIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, float* out) {
  std::copy_n(IndexerKeyRow(seq, layer, pos), index_width_, out);
}

}  // namespace mx
