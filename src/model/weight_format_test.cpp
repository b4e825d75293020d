// The LinearFormat table on fresh random weights of every format: loading from checkpoint
// bytes (element values against the source / the MXFP4 dequantizer), row views and copies,
// column slices and their block rule, bytes per block, and the threaded GEMM against the raw
// column-range kernel the MoE uses.
#include "model/weight_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>

#include "base/mmap.h"
#include "base/numerics.h"
#include "kernels/bf16_packed.h"
#include "model/weight_bytes.h"
#include "quant/quant_format.h"

namespace mx::weight_format_test {
namespace {

constexpr int64_t kN = 24, kK = 96;  // K: three MXFP4 blocks

// A checkpoint tensor's bytes and its view (and, for MXFP4, the scale tensor's).
struct FileTensor {
  std::vector<uint8_t> bytes, scale_bytes;
  TensorView view, scale;
  std::vector<float> values;  // W[n, k] as the format holds it (fp32)
};

FileTensor MakeTensor(DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  FileTensor t;
  t.values.resize(kN * kK);
  for (float& v : t.values) v = g(rng);
  t.view.name = "w";
  t.view.dtype = dtype;
  t.view.shape = {kN, kK};
  if (dtype == DType::kBF16 || dtype == DType::kF16) {
    t.bytes.resize(kN * kK * 2);
    for (int64_t i = 0; i < kN * kK; ++i) {
      const uint16_t h = dtype == DType::kBF16 ? F32ToBf16(t.values[i]) : F32ToF16(t.values[i]);
      t.values[i] = dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  } else if (dtype == DType::kF32) {
    t.bytes.resize(kN * kK * 4);
    std::memcpy(t.bytes.data(), t.values.data(), t.bytes.size());
  } else {  // MXFP4 in Quark's layout: codes [n, k/2] (U8) + E8M0 scales [n, k/32]
    t.view.shape = {kN, kK / 2};
    t.bytes.resize(kN * kK / 2);
    t.scale_bytes.resize(kN * kK / 32);
    for (int64_t r = 0; r < kN; ++r) {
      const quant::QuantFormat& q = quant::Mxfp4Format();  // as `mxserve quantize` writes
      EXPECT_TRUE(q.encode(t.values.data() + r * kK, 1, kK, quant::ScaleMode::kEven, r,
                           t.bytes.data() + r * kK / 2, t.scale_bytes.data() + r * kK / 32)
                      .ok());
      q.decode(t.bytes.data() + r * kK / 2, t.scale_bytes.data() + r * kK / 32, 1, kK,
               t.values.data() + r * kK);
    }
    t.scale.name = "w_scale";
    t.scale.dtype = DType::kU8;
    t.scale.shape = {kN, kK / 32};
    t.scale.data = t.scale_bytes.data();
    t.scale.nbytes = t.scale_bytes.size();
  }
  t.view.data = t.bytes.data();
  t.view.nbytes = t.bytes.size();
  return t;
}

LinearWeight Load(const FileTensor& t) {
  const LinearFormat* f = FormatForFileDtype(t.view.dtype);
  EXPECT_NE(f, nullptr);
  return f->load(t.view, f->codec != nullptr ? &t.scale : nullptr);
}

class EveryFormat : public ::testing::TestWithParam<DType> {};

TEST_P(EveryFormat, LoadsAndReadsEveryElement) {
  const FileTensor t = MakeTensor(GetParam(), 1);
  const LinearWeight w = Load(t);
  EXPECT_EQ(w.n, kN);
  EXPECT_EQ(w.k, kK);
  const LinearFormat& f = FormatOf(w);
  EXPECT_EQ(&f, FormatForFileDtype(GetParam()));
  for (int64_t r = 0; r < kN; ++r) {
    for (int64_t c = 0; c < kK; ++c) ASSERT_EQ(w.at(r, c), t.values[r * kK + c]) << r << "," << c;
  }
  // Bytes in the kernels' layout: per block of `block` elements, block_bytes.
  EXPECT_EQ(WeightBytes(w), kN * (kK / f.block) * f.block_bytes);
}

TEST_P(EveryFormat, RowViewsCopiesAndColumnSlices) {
  const FileTensor t = MakeTensor(GetParam(), 2);
  const LinearWeight w = Load(t);
  const LinearWeight view = w.Rows(5, 7);
  LinearWeight copy = SliceRows(Load(t), 5, 7);
  auto cols = SliceCols(w, 32, 64, "w");
  ASSERT_TRUE(cols.ok()) << cols.status().ToString();
  for (int64_t r = 0; r < 7; ++r) {
    for (int64_t c = 0; c < kK; ++c) {
      ASSERT_EQ(view.at(r, c), t.values[(r + 5) * kK + c]);
      ASSERT_EQ(copy.at(r, c), t.values[(r + 5) * kK + c]);
    }
  }
  for (int64_t r = 0; r < kN; ++r) {
    for (int64_t c = 0; c < 64; ++c) ASSERT_EQ(cols->at(r, c), t.values[r * kK + 32 + c]);
  }
  // A slice that cuts a block is refused where blocks are longer than one element.
  auto cut = SliceCols(w, 16, 32, "model.layers.1.mlp.down_proj.weight");
  if (FormatOf(w).block == 1) {
    EXPECT_TRUE(cut.ok());
  } else {
    ASSERT_FALSE(cut.ok());
    EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(cut.status().message().find("32-element block"), std::string::npos);
    EXPECT_NE(cut.status().message().find("down_proj"), std::string::npos);
  }
}

TEST_P(EveryFormat, ThreadedGemmEqualsTheColumnKernelOnEveryLevel) {
  const FileTensor t = MakeTensor(GetParam(), 3);
  const LinearWeight w = Load(t);
  const LinearFormat& f = FormatOf(w);
  const int64_t m = 5;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(m * kK);
  for (float& v : x) v = g(rng);
  std::vector<BlockQ8> xq(m * kK / 32);
  for (int64_t i = 0; i < m; ++i) QuantizeRowQ8(x.data() + i * kK, kK, xq.data() + i * kK / 32);
  ThreadPool pool(2);
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* kt = GetKernelTable(l);
    if (kt == nullptr) continue;
    SCOPED_TRACE(KernelLevelName(l));
    std::vector<float> y(m * kN), z(m * kN, NAN);
    Linear(*kt, pool, x.data(), m, w, y.data());
    // Two column ranges, as the MoE splits an expert's width.
    f.gemm_cols(*kt, w, x.data(), xq.data(), m, 0, 10, z.data(), kN, {});
    f.gemm_cols(*kt, w, x.data(), xq.data(), m, 10, kN, z.data(), kN, {});
    for (int64_t i = 0; i < m * kN; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      EXPECT_NEAR(z[i], y[i], 1e-5f * (1.0f + std::abs(y[i]))) << i;
    }
    // Against the weight's own values in double (MXFP4: the Q8 activations' error as well).
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < kN; ++j) {
        double ref = 0, mag = 0;
        for (int64_t c = 0; c < kK; ++c) {
          ref += static_cast<double>(x[i * kK + c]) * t.values[j * kK + c];
          mag += std::abs(static_cast<double>(x[i * kK + c]) * t.values[j * kK + c]);
        }
        EXPECT_NEAR(y[i * kN + j], ref, (f.q8_activations ? 2e-2 : 1e-5) * (1 + mag));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, EveryFormat,
                         ::testing::Values(DType::kBF16, DType::kF16, DType::kF32, DType::kU8),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// FP8 over several 128 × 128 blocks with partial ones on both edges: elements, row views at an
// offset inside a block (the phase), copies, column slices at block edges (the last one partial)
// and the refusal of one that cuts a block, bytes, and the threaded GEMM against the column
// kernel on every level.
TEST(LinearFormats, Fp8BlocksRowPhasesAndColumnSlices) {
  constexpr int64_t n = 300, k = 260, kb = 3;
  std::mt19937_64 rng(9);
  std::vector<uint8_t> codes(n * k);
  for (auto& c : codes) {
    do c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f);
  }
  std::vector<float> sc(3 * kb);
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = std::ldexp(1.0f + 0.1f * i, -6 - int(i % 3));
  TensorView v, s;
  v.name = "w";
  v.dtype = DType::kF8_E4M3;
  v.shape = {n, k};
  v.data = codes.data();
  v.nbytes = codes.size();
  s.dtype = DType::kF32;
  s.shape = {3, kb};
  s.data = reinterpret_cast<const uint8_t*>(sc.data());
  s.nbytes = sc.size() * 4;
  const LinearFormat* f = FormatForFileDtype(DType::kF8_E4M3);
  ASSERT_NE(f, nullptr);
  const LinearWeight w = f->load(v, &s);
  auto value = [&](int64_t r, int64_t c) {
    return Fp8E4M3FnToF32(codes[r * k + c]) * sc[r / 128 * kb + c / 128];
  };
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) ASSERT_EQ(w.at(r, c), value(r, c)) << r << "," << c;
  }
  EXPECT_EQ(WeightBytes(w), n * k + 4 * 3 * kb);
  const LinearWeight view = w.Rows(130, 140);  // rows 2..141 of block row 1, into block row 2
  const LinearWeight copy = f->rows(w, 130, 140, /*copy=*/true);
  for (int64_t r = 0; r < 140; ++r) {
    for (int64_t c = 0; c < k; c += 7) {
      ASSERT_EQ(view.at(r, c), value(130 + r, c));
      ASSERT_EQ(copy.at(r, c), value(130 + r, c));
    }
  }
  auto mid = SliceCols(view, 128, 128, "w");
  auto last = SliceCols(view, 128, 132, "w");  // to k: the partial last block
  ASSERT_TRUE(mid.ok() && last.ok());
  for (int64_t r = 0; r < 140; ++r) {
    for (int64_t c = 0; c < 132; ++c) {
      if (c < 128) {
        ASSERT_EQ(mid->at(r, c), value(130 + r, 128 + c));
      }
      ASSERT_EQ(last->at(r, c), value(130 + r, 128 + c));
    }
  }
  auto cut = SliceCols(w, 64, 128, "model.layers.1.self_attn.o_proj.weight");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("128-element block"), std::string::npos);
  EXPECT_NE(cut.status().message().find("o_proj"), std::string::npos);
  // GEMM of the row view (phase 2) and its slice against the column kernel and float64.
  const int64_t m = 3;
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (float& e : x) e = g(rng);
  ThreadPool pool(2);
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* kt = GetKernelTable(l);
    if (kt == nullptr) continue;
    SCOPED_TRACE(KernelLevelName(l));
    std::vector<float> y(m * 140), z(m * 140, NAN);
    Linear(*kt, pool, x.data(), m, view, y.data());
    f->gemm_cols(*kt, view, x.data(), nullptr, m, 0, 61, z.data(), 140, {});
    f->gemm_cols(*kt, view, x.data(), nullptr, m, 61, 140, z.data(), 140, {});
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < 140; ++j) {
        double ref = 0, mag = 0;
        for (int64_t c = 0; c < k; ++c) {
          ref += double(x[i * k + c]) * value(130 + j, c);
          mag += std::fabs(double(x[i * k + c]) * value(130 + j, c));
        }
        ASSERT_NEAR(y[i * 140 + j], ref, 1e-5 * mag) << i << "," << j;
        ASSERT_EQ(z[i * 140 + j], y[i * 140 + j]) << i << "," << j;
      }
    }
  }
}

// A bf16 tensor larger than the loader's packing chunk, mapped from a file: packed chunk by
// chunk (each chunk's pages released once packed), the result is the whole tensor, every element
// in its place, the last group padded; the view still reads the file afterwards.
TEST(LinearFormats, MappedBf16PacksInChunksToTheWholeLayout) {
  constexpr int64_t n = 40007, k = 100;  // ~8 MB: two 4 MB chunks and a partial last group
  std::vector<uint16_t> src(n * k);
  std::mt19937 rng(7);
  for (uint16_t& x : src) x = F32ToBf16(std::normal_distribution<float>(0.0f, 1.0f)(rng));
  const std::string path = ::testing::TempDir() + "/mx_bf16_chunks.bin";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(src.data(), 2, src.size(), f), src.size());
    std::fclose(f);
  }
  auto map = MappedFile::Open(path);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  TensorView v;
  v.name = "w";
  v.dtype = DType::kBF16;
  v.shape = {n, k};
  v.data = map->data();
  v.nbytes = map->size();
  v.map = &*map;
  const LinearWeight w = FormatForFileDtype(DType::kBF16)->load(v, nullptr);
  ASSERT_EQ(w.n, n);
  ASSERT_EQ(w.owned_bf16.size(), static_cast<size_t>(Bf16PackedElems(n, k)));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      ASSERT_EQ(Bf16PackedAt(w.bf16p, k, r, c), src[r * k + c]) << r << "," << c;
    }
  }
  for (int64_t r = n; r < Bf16Groups(n) * kBf16RowGroup; ++r) {
    ASSERT_EQ(Bf16PackedAt(w.bf16p, k, r, 0), 0) << r;  // padding rows are zero
  }
  uint16_t last;
  std::memcpy(&last, v.data + v.nbytes - 2, 2);  // the released pages map back in
  EXPECT_EQ(last, src.back());
  std::remove(path.c_str());
}

TEST(LinearFormats, TableIsConsistent) {
  std::set<std::string> names;
  std::set<DType> dtypes, files;
  const uint16_t packed[1] = {0};
  for (const LinearFormat& f : LinearFormats()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    // One format per dtype, but for bf16's two layouts, told apart by which pointer is set.
    const bool row_major_bf16 = f.name == std::string("bf16 row-major");
    if (!row_major_bf16) EXPECT_TRUE(dtypes.insert(f.dtype).second) << f.name;
    for (DType d : f.file_dtypes) EXPECT_TRUE(files.insert(d).second) << f.name;
    EXPECT_GE(f.block, 1);
    EXPECT_GE(f.block_bytes, 1);
    EXPECT_EQ(f.q8_activations, f.block == 32) << f.name;
    if (f.codec != nullptr) {  // the checkpoint codec agrees on the name and the block
      EXPECT_EQ(std::string(f.codec->name), f.name);
      EXPECT_EQ(f.codec->block, f.block);
    }
    LinearWeight w;
    w.dtype = f.dtype;
    if (f.dtype == DType::kBF16 && !row_major_bf16) w.bf16p = packed;
    EXPECT_EQ(&FormatOf(w), &f) << f.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"bf16", "bf16 row-major", "f32", "mxfp4", "fp8"}));
  // Checkpoint bf16 loads packed; the row-major layout is only for weights made in code.
  EXPECT_EQ(FormatForFileDtype(DType::kBF16)->name, std::string("bf16"));
  EXPECT_EQ(FormatForFileDtype(DType::kBF16)->row_group, kBf16RowGroup);
  EXPECT_EQ(FormatForFileDtype(DType::kF8_E4M3)->name, std::string("fp8"));
  EXPECT_EQ(FormatForFileDtype(DType::kF16)->name, std::string("f32"));
  EXPECT_EQ(FormatForFileDtype(DType::kU8)->name, std::string("mxfp4"));
  EXPECT_EQ(FormatForFileDtype(DType::kI32), nullptr);
}

}  // namespace
}  // namespace mx::weight_format_test
