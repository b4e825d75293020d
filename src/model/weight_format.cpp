// The LinearFormat table: bf16 (packed at load in 16-row groups; kernels/bf16_packed.h), bf16
// row-major (the weights derived in code, e.g. MLA's absorbed key weight), f32 (owned; f16
// widened), MXFP4 (Quark codes packed in 16-row groups with their E8M0 scales; kernels/mxfp4.h),
// FP8 (e4m3 codes and 128 × 128 block scales as stored, mapped, and packed at load in 16-row
// groups; kernels/fp8.h).
#include "model/weight_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/numerics.h"
#include "quant/mxfp4.h"

namespace mx {

namespace {

// ---- bf16 row-major: W [n, k] as bf16 (the weights derived in code; a view where it can be).

LinearWeight LoadBf16(const TensorView& v, const TensorView*) {
  LinearWeight w;
  w.dtype = DType::kBF16;
  w.n = v.shape[0];
  w.k = v.shape[1];
  if (reinterpret_cast<uintptr_t>(v.data) % alignof(uint16_t) == 0) {
    w.bf16 = reinterpret_cast<const uint16_t*>(v.data);
  } else {
    w.owned_bf16.resize(v.numel());
    std::memcpy(w.owned_bf16.data(), v.data, v.nbytes);
    w.bf16 = w.owned_bf16.data();
  }
  return w;
}

float AtBf16(const LinearWeight& w, int64_t row, int64_t col) {
  return Bf16ToF32(w.bf16[row * w.k + col]);
}

LinearWeight RowsBf16(const LinearWeight& w, int64_t first, int64_t count, bool copy) {
  LinearWeight v;
  v.dtype = w.dtype;
  v.n = count;
  v.k = w.k;
  if (!copy) {
    v.bf16 = w.bf16 + first * w.k;
    return v;
  }
  v.owned_bf16.assign(w.bf16 + first * w.k, w.bf16 + (first + count) * w.k);
  v.bf16 = v.owned_bf16.data();
  return v;
}

LinearWeight ColsBf16(const LinearWeight& w, int64_t first, int64_t count) {
  LinearWeight v;
  v.dtype = w.dtype;
  v.n = w.n;
  v.k = count;
  v.owned_bf16.resize(w.n * count);
  for (int64_t r = 0; r < w.n; ++r) {
    std::copy_n(w.bf16 + r * w.k + first, count, v.owned_bf16.data() + r * count);
  }
  v.bf16 = v.owned_bf16.data();
  return v;
}

void GemmBf16Weight(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
                    const LinearWeight& w, float* y, GemmTiling t) {
  GemmBf16(kt, pool, x, m, w.k, w.bf16, w.n, y, t);
}

void ColsGemmBf16(const KernelTable& kt, const LinearWeight& w, const float* xf, const BlockQ8*,
                  int64_t m, int64_t c0, int64_t c1, float* y, int64_t ldy, GemmTiling t) {
  const int64_t k = w.k;
  kt.gemm_bf16(xf, k, w.bf16 + c0 * k, k, y + c0, ldy, m, c1 - c0, k, t);
}

// ---- bf16 packed: every bf16 linear weight the loader reads, packed once in 16-row groups of
// k-pairs for the kernels (kernels/bf16_packed.h). A slice of rows starting at a group boundary
// is a view; any other row or column slice is unpacked and packed again.

LinearWeight PackedBf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k) {
  LinearWeight p;
  p.dtype = DType::kBF16;
  p.n = n;
  p.k = k;
  p.owned_bf16.resize(Bf16PackedElems(n, k));
  PackBf16(w, ldw, n, k, p.owned_bf16.data());
  p.bf16p = p.owned_bf16.data();
  return p;
}

// Rows [first, first + count), columns [c0, c0 + kc) of a packed W, row-major.
std::vector<uint16_t> UnpackBf16(const LinearWeight& w, int64_t first, int64_t count, int64_t c0,
                                 int64_t kc) {
  std::vector<uint16_t> out(count * kc);
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t c = 0; c < kc; ++c)
      out[r * kc + c] = Bf16PackedAt(w.bf16p, w.k, first + r, c0 + c);
  }
  return out;
}

// Mapped rows packed per chunk of about this many bytes, each chunk's pages dropped from the
// resident set once packed: a 1.9 GB embedding or lm_head does not stay resident twice (file
// and packed copy) while it loads.
constexpr int64_t kPackChunkBytes = int64_t{4} << 20;

LinearWeight LoadBf16Packed(const TensorView& v, const TensorView*) {
  const int64_t n = v.shape[0], k = v.shape[1];
  if (reinterpret_cast<uintptr_t>(v.data) % alignof(uint16_t) == 0) {
    LinearWeight p;
    p.dtype = DType::kBF16;
    p.n = n;
    p.k = k;
    p.owned_bf16.resize(Bf16PackedElems(n, k));
    const auto* w = reinterpret_cast<const uint16_t*>(v.data);
    const int64_t chunk =
        std::max<int64_t>(1, kPackChunkBytes / std::max<int64_t>(1, 2 * k * kBf16RowGroup)) *
        kBf16RowGroup;
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {  // whole groups, so the chunks tile the layout
      const int64_t rows = std::min(chunk, n - r0);
      PackBf16(w + r0 * k, k, rows, k,
               p.owned_bf16.data() + r0 / kBf16RowGroup * 2 * kBf16RowGroup * Bf16Pairs(k));
      ReleaseTensorPages(v, static_cast<size_t>(2 * r0 * k), static_cast<size_t>(2 * rows * k));
    }
    p.bf16p = p.owned_bf16.data();
    return p;
  }
  std::vector<uint16_t> aligned(v.numel());
  std::memcpy(aligned.data(), v.data, v.nbytes);
  return PackedBf16(aligned.data(), k, n, k);
}

float AtBf16Packed(const LinearWeight& w, int64_t row, int64_t col) {
  return Bf16ToF32(Bf16PackedAt(w.bf16p, w.k, row, col));
}

LinearWeight RowsBf16Packed(const LinearWeight& w, int64_t first, int64_t count, bool copy) {
  if (!copy && first % kBf16RowGroup == 0) {
    LinearWeight v;
    v.dtype = w.dtype;
    v.n = count;
    v.k = w.k;
    v.bf16p = w.bf16p + (first / kBf16RowGroup) * Bf16Pairs(w.k) * 2 * kBf16RowGroup;
    return v;
  }
  const std::vector<uint16_t> rows = UnpackBf16(w, first, count, 0, w.k);
  return PackedBf16(rows.data(), w.k, count, w.k);
}

LinearWeight ColsBf16Packed(const LinearWeight& w, int64_t first, int64_t count) {
  const std::vector<uint16_t> cols = UnpackBf16(w, 0, w.n, first, count);
  return PackedBf16(cols.data(), count, w.n, count);
}

void GemmBf16PackedWeight(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
                          const LinearWeight& w, float* y, GemmTiling t) {
  GemmBf16Packed(kt, pool, x, m, w.k, w.bf16p, w.n, y, t);
}

void ColsGemmBf16Packed(const KernelTable& kt, const LinearWeight& w, const float* xf,
                        const BlockQ8*, int64_t m, int64_t c0, int64_t c1, float* y, int64_t ldy,
                        GemmTiling t) {
  kt.gemm_bf16_packed(xf, w.k, m, w.bf16p, w.k, c0, c1, y + c0, ldy, t);
}

// ---- f32: W [n, k] owned as fp32 (checkpoint f32 or f16).

LinearWeight LoadF32(const TensorView& v, const TensorView*) {
  LinearWeight w;
  w.dtype = DType::kF32;
  w.n = v.shape[0];
  w.k = v.shape[1];
  w.owned_f32.resize(v.numel());
  for (int64_t i = 0; i < v.numel(); ++i) {
    if (v.dtype == DType::kF16) {
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      w.owned_f32[i] = F16ToF32(h);
    } else {
      std::memcpy(&w.owned_f32[i], v.data + 4 * i, 4);
    }
  }
  w.f32 = w.owned_f32.data();
  return w;
}

float AtF32(const LinearWeight& w, int64_t row, int64_t col) { return w.f32[row * w.k + col]; }

LinearWeight RowsF32(const LinearWeight& w, int64_t first, int64_t count, bool copy) {
  LinearWeight v;
  v.dtype = w.dtype;
  v.n = count;
  v.k = w.k;
  if (!copy) {
    v.f32 = w.f32 + first * w.k;
    return v;
  }
  v.owned_f32.assign(w.f32 + first * w.k, w.f32 + (first + count) * w.k);
  v.f32 = v.owned_f32.data();
  return v;
}

LinearWeight ColsF32(const LinearWeight& w, int64_t first, int64_t count) {
  LinearWeight v;
  v.dtype = w.dtype;
  v.n = w.n;
  v.k = count;
  v.owned_f32.resize(w.n * count);
  for (int64_t r = 0; r < w.n; ++r) {
    std::copy_n(w.f32 + r * w.k + first, count, v.owned_f32.data() + r * count);
  }
  v.f32 = v.owned_f32.data();
  return v;
}

void GemmF32Weight(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
                   const LinearWeight& w, float* y, GemmTiling t) {
  GemmF32(kt, pool, x, m, w.k, w.f32, w.n, y, t);
}

void ColsGemmF32(const KernelTable& kt, const LinearWeight& w, const float* xf, const BlockQ8*,
                 int64_t m, int64_t c0, int64_t c1, float* y, int64_t ldy, GemmTiling t) {
  const int64_t k = w.k;
  kt.gemm_f32(xf, k, w.f32 + c0 * k, k, y + c0, ldy, m, c1 - c0, k, t);
}

// ---- MXFP4: packed in groups of 16 rows for the kernels (kernels/mxfp4.h: per group and
// 32-block 256 code bytes and 16 E8M0 scales; the last group padded with zero rows). A slice of
// rows starting at a group boundary is a view; any other row or column slice is unpacked to
// split-half rows and packed again.

constexpr int64_t kMxBlock = quant::kMxBlock;

// W [n, k] from split-half rows (row j at q + j·k/2, e + j·k/32).
LinearWeight PackedMxfp4(const uint8_t* q, const uint8_t* e, int64_t n, int64_t k) {
  LinearWeight w;
  w.dtype = DType::kU8;
  w.n = n;
  w.k = k;
  w.owned_mx_q.resize(Mxfp4PackedCodeBytes(n, k));
  w.owned_mx_e.resize(Mxfp4PackedScaleBytes(n, k));
  PackMxfp4(q, e, n, k, w.owned_mx_q.data(), w.owned_mx_e.data());
  w.mx_q = w.owned_mx_q.data();
  w.mx_e = w.owned_mx_e.data();
  return w;
}

// Rows [first, first + count) of w in split-half order: codes [count, k/2], scales [count, k/32].
void UnpackRows(const LinearWeight& w, int64_t first, int64_t count, std::vector<uint8_t>& q,
                std::vector<uint8_t>& e) {
  const int64_t k = w.k;
  q.resize(count * k / 2);
  e.resize(count * k / kMxBlock);
  for (int64_t r = 0; r < count; ++r) {
    UnpackMxfp4Row(w.mx_q, w.mx_e, k, first + r, q.data() + r * k / 2, e.data() + r * k / kMxBlock);
  }
}

LinearWeight LoadMxfp4(const TensorView& v, const TensorView* scale) {
  MX_CHECK(scale != nullptr);  // CheckCheckpoint and CheckQuantization pair them
  const int64_t n = v.shape[0], k = v.shape[1] * 2;
  std::vector<uint8_t> split(v.nbytes);
  quant::RepackQuarkToSplitHalf(v.data, n * k / kMxBlock, split.data());
  return PackedMxfp4(split.data(), scale->data, n, k);
}

float AtMxfp4(const LinearWeight& w, int64_t row, int64_t col) {
  const int64_t nb = w.k / kMxBlock, b = col / kMxBlock, t = col % kMxBlock;
  const int64_t g = row / kMxRowGroup, l = row % kMxRowGroup, s = t % 16;
  const uint8_t byte = w.mx_q[(g * nb + b) * kMxGroupBlockBytes + (s / 4) * 64 + 4 * l + s % 4];
  return E2M1ToF32(t < 16 ? byte & 0xf : byte >> 4) *
         E8M0ToF32(w.mx_e[(g * nb + b) * kMxRowGroup + l]);
}

LinearWeight RowsMxfp4(const LinearWeight& w, int64_t first, int64_t count, bool copy) {
  const int64_t nb = w.k / kMxBlock;
  if (!copy && first % kMxRowGroup == 0) {
    LinearWeight v;
    v.dtype = w.dtype;
    v.n = count;
    v.k = w.k;
    const int64_t g = first / kMxRowGroup;
    v.mx_q = w.mx_q + g * nb * kMxGroupBlockBytes;
    v.mx_e = w.mx_e + g * nb * kMxRowGroup;
    return v;
  }
  std::vector<uint8_t> q, e;
  UnpackRows(w, first, count, q, e);
  return PackedMxfp4(q.data(), e.data(), count, w.k);
}

LinearWeight ColsMxfp4(const LinearWeight& w, int64_t first, int64_t count) {
  MX_CHECK(first % kMxBlock == 0 && count % kMxBlock == 0);
  std::vector<uint8_t> q, e;
  UnpackRows(w, 0, w.n, q, e);
  std::vector<uint8_t> cq(w.n * count / 2), ce(w.n * count / kMxBlock);
  for (int64_t r = 0; r < w.n; ++r) {
    std::copy_n(q.data() + r * (w.k / 2) + first / 2, count / 2, cq.data() + r * (count / 2));
    std::copy_n(e.data() + r * (w.k / kMxBlock) + first / kMxBlock, count / kMxBlock,
                ce.data() + r * (count / kMxBlock));
  }
  return PackedMxfp4(cq.data(), ce.data(), w.n, count);
}

void GemmMxfp4Weight(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
                     const LinearWeight& w, float* y, GemmTiling t) {
  GemmMxfp4(kt, pool, x, m, w.k, w.mx_q, w.mx_e, w.n, y, t);
}

void ColsGemmMxfp4(const KernelTable& kt, const LinearWeight& w, const float*, const BlockQ8* xq,
                   int64_t m, int64_t c0, int64_t c1, float* y, int64_t ldy, GemmTiling t) {
  MX_CHECK_MSG(kt.gemm_mxfp4 != nullptr, "the kernel table has no gemm_mxfp4");
  kt.gemm_mxfp4(xq, m, w.mx_q, w.mx_e, w.k, c0, c1, y + c0, ldy, t);
}

// ---- FP8: e4m3 codes [n, k] (a view into the mapped checkpoint) and fp32 scales per 128 × 128
// block (a view when aligned); rows from fp8_phase of the first block row (LinearWeight); and
// the kernels' packed copy of both (kernels/fp8.h), made once per weight at load.

constexpr int64_t kFp8 = kFp8Block;

void PackFp8Weight(LinearWeight& w) {
  w.owned_fp8p.resize(Fp8PackedBytes(w.n, w.k));
  w.owned_fp8p_s.resize(Fp8PackedScales(w.n, w.k));
  PackFp8(w.fp8, w.k, w.fp8_s, w.fp8_phase, w.n, w.k, w.owned_fp8p.data(), w.owned_fp8p_s.data());
  w.fp8p = w.owned_fp8p.data();
  w.fp8p_s = w.owned_fp8p_s.data();
}

LinearWeight LoadFp8(const TensorView& v, const TensorView* scale) {
  MX_CHECK(scale != nullptr);  // CheckCheckpoint pairs them and checks the scale's shape
  LinearWeight w;
  w.dtype = DType::kF8_E4M3;
  w.n = v.shape[0];
  w.k = v.shape[1];
  w.fp8 = v.data;
  if (reinterpret_cast<uintptr_t>(scale->data) % alignof(float) == 0) {
    w.fp8_s = reinterpret_cast<const float*>(scale->data);
  } else {
    w.owned_fp8_s.resize(scale->numel());
    std::memcpy(w.owned_fp8_s.data(), scale->data, scale->nbytes);
    w.fp8_s = w.owned_fp8_s.data();
  }
  PackFp8Weight(w);
  return w;
}

// The scales of W's row `row` (its block row).
const float* Fp8ScaleRow(const LinearWeight& w, int64_t row) {
  return w.fp8_s + (w.fp8_phase + row) / kFp8 * Fp8ScaleCols(w.k);
}

float AtFp8(const LinearWeight& w, int64_t row, int64_t col) {
  return Fp8E4M3FnToF32(w.fp8[row * w.k + col]) * Fp8ScaleRow(w, row)[col / kFp8];
}

// A view (`copy` false): the row-major codes viewed, the packed ones viewed when `first` starts
// a group, else packed anew. A copy: the row-major codes copied unless they are a view into
// the mapped checkpoint (which outlives every weight), and packed anew.
LinearWeight RowsFp8(const LinearWeight& w, int64_t first, int64_t count, bool copy) {
  LinearWeight v;
  v.dtype = w.dtype;
  v.n = count;
  v.k = w.k;
  v.fp8_phase = (w.fp8_phase + first) % kFp8;
  const bool mapped = w.owned_mx_q.empty() && w.owned_fp8_s.empty();
  if (!copy || mapped) {
    v.fp8 = w.fp8 + first * w.k;
    v.fp8_s = Fp8ScaleRow(w, first);
    if (!copy && first % kFp8RowGroup == 0) {
      const int64_t g = first / kFp8RowGroup;
      v.fp8p = w.fp8p + g * Fp8Quads(w.k) * kFp8QuadBytes;
      v.fp8p_s = w.fp8p_s + g * Fp8ScaleCols(w.k) * kFp8RowGroup;
    } else {
      PackFp8Weight(v);
    }
    return v;
  }
  v.owned_mx_q.assign(w.fp8 + first * w.k, w.fp8 + (first + count) * w.k);
  const int64_t block_rows = (v.fp8_phase + count + kFp8 - 1) / kFp8;
  const float* s = Fp8ScaleRow(w, first);
  v.owned_fp8_s.assign(s, s + block_rows * Fp8ScaleCols(w.k));
  v.fp8 = v.owned_mx_q.data();
  v.fp8_s = v.owned_fp8_s.data();
  PackFp8Weight(v);
  return v;
}

// REQUIRES: first a multiple of 128; count too unless the slice ends at k (a partial block).
LinearWeight ColsFp8(const LinearWeight& w, int64_t first, int64_t count) {
  MX_CHECK(first % kFp8 == 0 && (count % kFp8 == 0 || first + count == w.k));
  LinearWeight v;
  v.dtype = w.dtype;
  v.n = w.n;
  v.k = count;
  v.fp8_phase = w.fp8_phase;
  v.owned_mx_q.resize(w.n * count);
  for (int64_t r = 0; r < w.n; ++r) {
    std::copy_n(w.fp8 + r * w.k + first, count, v.owned_mx_q.data() + r * count);
  }
  const int64_t block_rows = (w.fp8_phase + w.n + kFp8 - 1) / kFp8, kb = Fp8ScaleCols(w.k),
                kbv = Fp8ScaleCols(count);
  v.owned_fp8_s.resize(block_rows * kbv);
  for (int64_t b = 0; b < block_rows; ++b) {
    std::copy_n(w.fp8_s + b * kb + first / kFp8, kbv, v.owned_fp8_s.data() + b * kbv);
  }
  v.fp8 = v.owned_mx_q.data();
  v.fp8_s = v.owned_fp8_s.data();
  PackFp8Weight(v);
  return v;
}

void GemmFp8Weight(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
                   const LinearWeight& w, float* y, GemmTiling t) {
  GemmFp8(kt, pool, x, m, w.k, w.fp8p, w.fp8p_s, w.n, y, t);
}

void ColsGemmFp8(const KernelTable& kt, const LinearWeight& w, const float* xf, const BlockQ8*,
                 int64_t m, int64_t c0, int64_t c1, float* y, int64_t ldy, GemmTiling t) {
  MX_CHECK_MSG(kt.gemm_fp8 != nullptr, "the kernel table has no gemm_fp8");
  kt.gemm_fp8(xf, w.k, m, w.fp8p, w.fp8p_s, w.k, c0, c1, y + c0, ldy, t);
}

// Bytes a weight occupies: its blocks × block_bytes (bf16, f32, MXFP4: every row has its own
// scales).
int64_t BytesPerRowBlocks(const LinearWeight& w) {
  const LinearFormat& f = FormatOf(w);
  return w.n * (w.k / f.block) * f.block_bytes;
}

// FP8: a byte per weight and 4 per 128 × 128 block (as stored; the packed copy the kernels read
// adds the padding to whole groups and 4 bytes per row and block, ~3%).
int64_t BytesFp8(const LinearWeight& w) {
  return w.n * w.k + 4 * ((w.fp8_phase + w.n + kFp8 - 1) / kFp8) * Fp8ScaleCols(w.k);
}

constexpr std::array<DType, 1> kBf16Files = {DType::kBF16};
constexpr std::array<DType, 2> kF32Files = {DType::kF32, DType::kF16};
constexpr std::array<DType, 1> kMxfp4Files = {DType::kU8};
constexpr std::array<DType, 1> kFp8Files = {DType::kF8_E4M3};

constexpr std::array<DType, 0> kNoFiles = {};

// Sized by its entries (an std::array of a stated size would zero-fill a missing one).
std::span<const LinearFormat> Formats() {
  static const auto t = std::to_array<LinearFormat>({
      {"bf16", DType::kBF16, 1, 2, kBf16Files, nullptr, false, kBf16RowGroup, LoadBf16Packed,
       AtBf16Packed, RowsBf16Packed, ColsBf16Packed, GemmBf16PackedWeight, ColsGemmBf16Packed,
       BytesPerRowBlocks},
      {"bf16 row-major", DType::kBF16, 1, 2, kNoFiles, nullptr, false, 1, LoadBf16, AtBf16,
       RowsBf16, ColsBf16, GemmBf16Weight, ColsGemmBf16, BytesPerRowBlocks},
      {"f32", DType::kF32, 1, 4, kF32Files, nullptr, false, 1, LoadF32, AtF32, RowsF32, ColsF32,
       GemmF32Weight, ColsGemmF32, BytesPerRowBlocks},
      {"mxfp4", DType::kU8, kMxBlock, kMxBlock / 2 + 1, kMxfp4Files, &quant::Mxfp4Format(), true,
       kMxRowGroup, LoadMxfp4, AtMxfp4, RowsMxfp4, ColsMxfp4, GemmMxfp4Weight, ColsGemmMxfp4,
       BytesPerRowBlocks},
      {"fp8", DType::kF8_E4M3, kFp8, kFp8, kFp8Files, &quant::Fp8Format(), false, kFp8RowGroup,
       LoadFp8, AtFp8, RowsFp8, ColsFp8, GemmFp8Weight, ColsGemmFp8, BytesFp8},
  });
  return t;
}

}  // namespace

std::span<const LinearFormat> LinearFormats() { return Formats(); }

const LinearFormat& FormatOf(const LinearWeight& w) {
  if (w.dtype == DType::kBF16) return Formats()[w.bf16p != nullptr ? 0 : 1];
  for (const LinearFormat& f : Formats()) {
    if (f.dtype == w.dtype) return f;
  }
  MX_CHECK_MSG(false, std::string("no linear format for dtype ") + DTypeName(w.dtype));
  return Formats()[0];
}

LinearWeight PackedBf16Weight(const uint16_t* w, int64_t ldw, int64_t n, int64_t k) {
  return PackedBf16(w, ldw, n, k);
}

const LinearFormat* FormatForFileDtype(DType file_dtype) {
  for (const LinearFormat& f : Formats()) {
    if (std::find(f.file_dtypes.begin(), f.file_dtypes.end(), file_dtype) != f.file_dtypes.end()) {
      return &f;
    }
  }
  return nullptr;
}

}  // namespace mx
