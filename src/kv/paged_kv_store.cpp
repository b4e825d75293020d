// PagedKvStore: page-table addressing and the fp32 / bf16 / fp8 row codecs.
#include "kv/paged_kv_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/attention_kernels.h"

namespace mx {

Result<KvCacheDtype> ParseKvCacheDtype(std::string_view name) {
  if (name == "auto" || name == "bf16" || name == "bfloat16") return KvCacheDtype::kBf16;
  if (name == "fp8_e4m3" || name == "fp8" || name == "fp8_e4m3fn") return KvCacheDtype::kFp8E4M3Fn;
  if (name == "fp8_e4m3fnuz") return KvCacheDtype::kFp8E4M3Fnuz;
  if (name == "f32" || name == "float32" || name == "fp32") return KvCacheDtype::kF32;
  return InvalidArgument("kv_cache_dtype '{}': expected auto, bf16, fp8_e4m3, fp8_e4m3fnuz or f32",
                         name);
}

const char* KvCacheDtypeName(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kF32:
      return "f32";
    case KvCacheDtype::kBf16:
      return "bf16";
    case KvCacheDtype::kFp8E4M3Fn:
      return "fp8_e4m3";
    case KvCacheDtype::kFp8E4M3Fnuz:
      return "fp8_e4m3fnuz";
  }
  return "?";
}

int64_t KvCacheDtypeBytes(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kF32:
      return 4;
    case KvCacheDtype::kBf16:
      return 2;
    default:
      return 1;
  }
}

namespace {
int64_t NumLayers(const ModelConfig& c) {
  return c.num_hidden_layers + (c.num_nextn_predict_layers > 0 ? 1 : 0);
}
int64_t NumFull(const ModelConfig& c) {
  if (!c.has_indexer) return 0;
  int64_t n = 0;
  for (int64_t l = 0; l < NumLayers(c); ++l) n += c.is_full_indexer_layer(l) ? 1 : 0;
  return n;
}
}  // namespace

int64_t PagedKvStore::BytesPerToken(const ModelConfig& c, KvCacheDtype dtype) {
  return (NumLayers(c) * c.mla_cache_values() + NumFull(c) * c.index_head_dim) *
         KvCacheDtypeBytes(dtype);
}

PagedKvStore::PagedKvStore(const ModelConfig& c, int64_t page_size, int64_t n_pages,
                           KvCacheDtype dtype, std::vector<float> layer_scales)
    : page_size_(page_size),
      n_pages_(n_pages),
      n_layers_(NumLayers(c)),
      mla_width_(c.mla_cache_values()),
      index_width_(c.index_head_dim),
      dtype_(dtype),
      elem_(KvCacheDtypeBytes(dtype)),
      scales_(std::move(layer_scales)) {
  MX_CHECK_GT(page_size, 0);
  if (scales_.empty()) scales_.assign(n_layers_, 1.0f);
  MX_CHECK_EQ(static_cast<int64_t>(scales_.size()), n_layers_);
  for (int64_t l = 0; l < n_layers_; ++l) {
    const bool full = c.has_indexer && c.is_full_indexer_layer(l);
    full_slot_.push_back(full ? n_full_++ : -1);
  }
  panels_ = page_size % kIndexerPanel == 0;
  mla_ = PageBuffer(static_cast<size_t>(n_pages * n_layers_ * page_size * mla_width_ * elem_));
  idx_ = PageBuffer(static_cast<size_t>(n_pages * n_full_ * page_size * index_width_ * elem_));
}

Status PagedKvStore::Reserve(int64_t seq, int64_t n_positions) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return NotFound("KV sequence {} has no page table", seq);
  const int64_t have = static_cast<int64_t>(it->second.size()) * page_size_;
  if (n_positions > have) {
    return ResourceExhausted("sequence {} needs {} positions; its pages hold {}", seq, n_positions,
                             have);
  }
  return Status::Ok();
}

uint8_t* PagedKvStore::MlaPtr(int64_t seq, int64_t layer, int64_t pos) {
  const std::vector<int32_t>& t = tables_.at(seq);
  const int64_t i = pos / page_size_;
  MX_CHECK_LT(i, static_cast<int64_t>(t.size()));
  MX_CHECK_LT(layer, n_layers_);
  const int64_t page = t[i], slot = pos % page_size_;
  return mla_.data() + (((page * n_layers_ + layer) * page_size_ + slot) * mla_width_) * elem_;
}

uint8_t* PagedKvStore::IdxPage(int64_t seq, int64_t layer, int64_t pos) {
  const std::vector<int32_t>& t = tables_.at(seq);
  const int64_t i = pos / page_size_;
  MX_CHECK_LT(i, static_cast<int64_t>(t.size()));
  const int64_t f = full_slot_[layer];
  MX_CHECK_GE(f, 0);
  return idx_.data() + ((t[i] * n_full_ + f) * page_size_ * index_width_) * elem_;
}

int64_t PagedKvStore::IdxOffset(int64_t slot, int64_t d) const {
  if (!panels_) return slot * index_width_ + d;
  return IndexerPanelIndex(slot, d, index_width_);
}

void PagedKvStore::Encode(const float* x, int64_t n, float scale, uint8_t* dst) const {
  switch (dtype_) {
    case KvCacheDtype::kF32:
      std::memcpy(dst, x, n * sizeof(float));
      return;
    case KvCacheDtype::kBf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case KvCacheDtype::kFp8E4M3Fn:
    case KvCacheDtype::kFp8E4M3Fnuz: {
      const Fp8Kind k = dtype_ == KvCacheDtype::kFp8E4M3Fn ? Fp8Kind::kE4M3FN : Fp8Kind::kE4M3FNUZ;
      const float mx = Fp8Max(k), inv = 1.0f / scale;
      for (int64_t i = 0; i < n; ++i) {
        float v = x[i] * inv;
        if (!std::isnan(v)) v = std::clamp(v, -mx, mx);  // saturate, never overflow to NaN
        dst[i] = F32ToFp8(v, k);
      }
      return;
    }
  }
}

void PagedKvStore::Decode(const uint8_t* src, int64_t n, float scale, float* x) const {
  switch (dtype_) {
    case KvCacheDtype::kF32:
      std::memcpy(x, src, n * sizeof(float));
      return;
    case KvCacheDtype::kBf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        x[i] = Bf16ToF32(h);
      }
      return;
    case KvCacheDtype::kFp8E4M3Fn:
      for (int64_t i = 0; i < n; ++i) x[i] = Fp8E4M3FnToF32(src[i]) * scale;
      return;
    case KvCacheDtype::kFp8E4M3Fnuz:
      for (int64_t i = 0; i < n; ++i) x[i] = Fp8E4M3FnuzToF32(src[i]) * scale;
      return;
  }
}

void PagedKvStore::WriteMlaRow(int64_t seq, int64_t layer, int64_t pos, const float* row) {
  Encode(row, mla_width_, scales_[layer], MlaPtr(seq, layer, pos));
}

void PagedKvStore::ReadMlaRow(int64_t seq, int64_t layer, int64_t pos, float* out) {
  Decode(MlaPtr(seq, layer, pos), mla_width_, scales_[layer], out);
}

bool PagedKvStore::MlaRowsBf16(int64_t seq, int64_t layer, std::span<const int64_t> pos,
                               const uint16_t** out) {
  if (dtype_ != KvCacheDtype::kBf16) return false;
  const std::vector<int32_t>& t = tables_.at(seq);
  MX_CHECK_LT(layer, n_layers_);
  const int64_t pages = static_cast<int64_t>(t.size());
  for (size_t i = 0; i < pos.size(); ++i) {
    const int64_t p = pos[i] / page_size_, slot = pos[i] % page_size_;
    MX_CHECK_LT(p, pages);
    const uint8_t* row =
        mla_.data() + (((t[p] * n_layers_ + layer) * page_size_ + slot) * mla_width_) * elem_;
    out[i] = reinterpret_cast<const uint16_t*>(row);
  }
  return true;
}

void PagedKvStore::WriteIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, const float* row) {
  uint8_t* page = IdxPage(seq, layer, pos);
  const int64_t slot = pos % page_size_;
  if (!panels_) return Encode(row, index_width_, scales_[layer], page + IdxOffset(slot, 0) * elem_);
  for (int64_t d = 0; d < index_width_; ++d) {
    Encode(row + d, 1, scales_[layer], page + IdxOffset(slot, d) * elem_);
  }
}

void PagedKvStore::ReadIndexerKeyRow(int64_t seq, int64_t layer, int64_t pos, float* out) {
  uint8_t* page = IdxPage(seq, layer, pos);
  const int64_t slot = pos % page_size_;
  if (!panels_) return Decode(page + IdxOffset(slot, 0) * elem_, index_width_, scales_[layer], out);
  for (int64_t d = 0; d < index_width_; ++d) {
    Decode(page + IdxOffset(slot, d) * elem_, 1, scales_[layer], out + d);
  }
}

bool PagedKvStore::IndexerPanelsBf16(int64_t seq, int64_t layer, int64_t n, const uint16_t** out) {
  if (dtype_ != KvCacheDtype::kBf16 || !panels_) return false;
  const std::vector<int32_t>& t = tables_.at(seq);
  const int64_t f = full_slot_[layer];
  MX_CHECK_GE(f, 0);
  const int64_t n_panels = (n + kIndexerPanel - 1) / kIndexerPanel;
  const int64_t per_page = page_size_ / kIndexerPanel;
  for (int64_t p = 0; p < n_panels; ++p) {
    const int64_t i = p / per_page;
    MX_CHECK_LT(i, static_cast<int64_t>(t.size()));
    const uint8_t* page = idx_.data() + ((t[i] * n_full_ + f) * page_size_ * index_width_) * elem_;
    out[p] = reinterpret_cast<const uint16_t*>(page) +
             IndexerPanelIndex((p % per_page) * kIndexerPanel, 0, index_width_);
  }
  return true;
}

Result<KvPageLayout> PagedKvStore::PageLayout(std::span<const int64_t> seqs) const {
  KvPageLayout l{page_size_, n_pages_, dtype_, scales_, {}};
  l.tables.reserve(seqs.size());
  for (int64_t seq : seqs) {
    auto it = tables_.find(seq);
    l.tables.push_back(it == tables_.end() ? std::vector<int32_t>() : it->second);
  }
  return l;
}

}  // namespace mx
