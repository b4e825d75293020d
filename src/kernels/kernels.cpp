// Kernel dispatch: one KernelTable per compiled level, the CPUID choice, and the threaded
// GEMM wrappers.
#include "kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"
#include "base/log.h"
#include "base/numerics.h"
#include "base/scratch.h"
#include "kernels/kernels_avx2.h"
#include "kernels/kernels_avx512.h"
#include "kernels/kernels_ref.h"

namespace mx {

const char* KernelLevelName(KernelLevel l) {
  switch (l) {
    case KernelLevel::kRef:
      return "ref";
    case KernelLevel::kAvx2:
      return "avx2";
    case KernelLevel::kAvx512:
      return "avx512";
  }
  return "?";
}

const char* GemmActivationsName(GemmActivations a) {
  return a == GemmActivations::kBf16 ? "bf16" : "fp32";
}

namespace {

// x[m, k] (row stride ldx) rounded to bf16 values, in a per-thread buffer (row stride k).
const float* RoundedToBf16(const float* x, int64_t ldx, int64_t m, int64_t k) {
  thread_local std::vector<float> buf;
  float* xr = Grow(buf, m * k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) xr[i * k + j] = Bf16ToF32(F32ToBf16(x[i * ldx + j]));
  }
  return xr;
}

// GemmActivations::kBf16 on a level without vdpbf16ps: its fp32-activation GEMM `Fn` run on x
// rounded to bf16 (the rounding is the whole difference). One template for the three GEMM
// signatures, which all start (x, ldx, ...): `M` and `K` are the positions of m and k among the
// arguments after those two. The argument types come from the table entry it is assigned to.
template <auto Fn, size_t M, size_t K, typename... A>
void RoundXThen(const float* x, int64_t ldx, A... a) {
  const std::tuple<A...> args(a...);
  const int64_t k = std::get<K>(args);
  Fn(RoundedToBf16(x, ldx, std::get<M>(args), k), k, a...);
}
// After (x, ldx): gemm_bf16 (w, ldw, y, ldy, m, n, k, t): M 4, K 6; gemm_bf16_packed (m, wp, k,
// r0, r1, y, ldy, t): M 0, K 2; gemm_fp8 (m, wp, sp, k, r0, r1, y, ldy, t): M 0, K 3.

// One literal table per level and activation mode (the AVX-512 level twice more: with and
// without AVX512_BF16's vdpbf16ps). GetKernelTable and WithGemmActivations only choose among
// them.

constexpr KernelTable kRefFp32 = {
    .level = KernelLevel::kRef,
    .bf16_activations = GemmActivations::kFp32,
    .gemm_bf16 = ref::GemmBf16,
    .gemm_f32 = ref::GemmF32,
    .rms_norm = ref::RmsNorm,
    .softmax = ref::Softmax,
    .rope = ref::Rope,
    .topk = ref::TopK,
    .swiglu = ref::SwiGlu,
    .attend = ref::Attend,
    .gemm_bf16_packed = ref::GemmBf16Packed,
    .gemm_mxfp4 = ref::GemmMxfp4,
    .attend_rows = ref::AttendRows,
    .attend_rows_bf16 = ref::AttendRowsBf16,
    .attend_combine = ref::AttendCombine,
    .indexer_scores = ref::IndexerScores,
    .indexer_scores_bf16 = ref::IndexerScoresBf16,
    .topk_set = ref::TopKSet,
    .gemm_fp8 = ref::GemmFp8,
};

constexpr KernelTable kRefBf16 = {
    .level = KernelLevel::kRef,
    .bf16_activations = GemmActivations::kBf16,
    .gemm_bf16 = ref::GemmBf16X16,
    .gemm_f32 = ref::GemmF32,
    .rms_norm = ref::RmsNorm,
    .softmax = ref::Softmax,
    .rope = ref::Rope,
    .topk = ref::TopK,
    .swiglu = ref::SwiGlu,
    .attend = ref::Attend,
    .gemm_bf16_packed = ref::GemmBf16PackedX16,
    .gemm_mxfp4 = ref::GemmMxfp4,
    .attend_rows = ref::AttendRows,
    .attend_rows_bf16 = ref::AttendRowsBf16,
    .attend_combine = ref::AttendCombine,
    .indexer_scores = ref::IndexerScores,
    .indexer_scores_bf16 = ref::IndexerScoresBf16,
    .topk_set = ref::TopKSet,
    .gemm_fp8 = ref::GemmFp8X16,
};

constexpr KernelTable kAvx2Fp32 = {
    .level = KernelLevel::kAvx2,
    .bf16_activations = GemmActivations::kFp32,
    .gemm_bf16 = avx2::GemmBf16,
    .gemm_f32 = avx2::GemmF32,
    .rms_norm = avx2::RmsNorm,
    .softmax = avx2::Softmax,
    .rope = avx2::Rope,
    .topk = avx2::TopK,
    .swiglu = avx2::SwiGlu,
    .attend = avx2::Attend,
    .gemm_bf16_packed = avx2::GemmBf16Packed,
    .gemm_mxfp4 = avx2::GemmMxfp4,
    .attend_rows = avx2::AttendRows,
    .attend_rows_bf16 = avx2::AttendRowsBf16,
    .attend_combine = avx2::AttendCombine,
    .indexer_scores = avx2::IndexerScores,
    .indexer_scores_bf16 = avx2::IndexerScoresBf16,
    .topk_set = RadixTopKSet,
    .gemm_fp8 = avx2::GemmFp8,
};

constexpr KernelTable kAvx2Bf16 = {
    .level = KernelLevel::kAvx2,
    .bf16_activations = GemmActivations::kBf16,
    .gemm_bf16 = RoundXThen<avx2::GemmBf16, 4, 6>,
    .gemm_f32 = avx2::GemmF32,
    .rms_norm = avx2::RmsNorm,
    .softmax = avx2::Softmax,
    .rope = avx2::Rope,
    .topk = avx2::TopK,
    .swiglu = avx2::SwiGlu,
    .attend = avx2::Attend,
    .gemm_bf16_packed = RoundXThen<avx2::GemmBf16Packed, 0, 2>,
    .gemm_mxfp4 = avx2::GemmMxfp4,
    .attend_rows = avx2::AttendRows,
    .attend_rows_bf16 = avx2::AttendRowsBf16,
    .attend_combine = avx2::AttendCombine,
    .indexer_scores = avx2::IndexerScores,
    .indexer_scores_bf16 = avx2::IndexerScoresBf16,
    .topk_set = RadixTopKSet,
    .gemm_fp8 = RoundXThen<avx2::GemmFp8, 0, 3>,
};

// AVX-512 without AVX512_BF16: bf16 weights widened to fp32 for FMAs; FP8 on the AVX2 kernel.
constexpr KernelTable kAvx512Fp32 = {
    .level = KernelLevel::kAvx512,
    .bf16_activations = GemmActivations::kFp32,
    .gemm_bf16 = avx512::GemmBf16,
    .gemm_f32 = avx512::GemmF32,
    .rms_norm = avx512::RmsNorm,
    .softmax = avx512::Softmax,
    .rope = avx512::Rope,
    .topk = avx512::TopK,
    .swiglu = avx512::SwiGlu,
    .attend = avx512::Attend,
    .gemm_bf16_packed = avx512::GemmBf16PackedFma,
    .gemm_mxfp4 = avx512::GemmMxfp4,
    .attend_rows = avx512::AttendRows,
    .attend_rows_bf16 = avx512::AttendRowsBf16,
    .attend_combine = avx512::AttendCombine,
    .indexer_scores = avx512::IndexerScores,
    .indexer_scores_bf16 = avx512::IndexerScoresBf16,
    .topk_set = RadixTopKSet,
    .gemm_fp8 = avx2::GemmFp8,
};

constexpr KernelTable kAvx512Bf16 = {
    .level = KernelLevel::kAvx512,
    .bf16_activations = GemmActivations::kBf16,
    .gemm_bf16 = RoundXThen<avx512::GemmBf16, 4, 6>,
    .gemm_f32 = avx512::GemmF32,
    .rms_norm = avx512::RmsNorm,
    .softmax = avx512::Softmax,
    .rope = avx512::Rope,
    .topk = avx512::TopK,
    .swiglu = avx512::SwiGlu,
    .attend = avx512::Attend,
    .gemm_bf16_packed = RoundXThen<avx512::GemmBf16PackedFma, 0, 2>,
    .gemm_mxfp4 = avx512::GemmMxfp4,
    .attend_rows = avx512::AttendRows,
    .attend_rows_bf16 = avx512::AttendRowsBf16,
    .attend_combine = avx512::AttendCombine,
    .indexer_scores = avx512::IndexerScores,
    .indexer_scores_bf16 = avx512::IndexerScoresBf16,
    .topk_set = RadixTopKSet,
    .gemm_fp8 = RoundXThen<avx2::GemmFp8, 0, 3>,
};

// AVX-512 with AVX512_BF16: the bf16 and FP8 GEMMs on vdpbf16ps (fp32 activations as three exact
// bf16 parts).
constexpr KernelTable kAvx512DotFp32 = {
    .level = KernelLevel::kAvx512,
    .bf16_activations = GemmActivations::kFp32,
    .gemm_bf16 = avx512::GemmBf16Dot,
    .gemm_f32 = avx512::GemmF32,
    .rms_norm = avx512::RmsNorm,
    .softmax = avx512::Softmax,
    .rope = avx512::Rope,
    .topk = avx512::TopK,
    .swiglu = avx512::SwiGlu,
    .attend = avx512::Attend,
    .gemm_bf16_packed = avx512::GemmBf16PackedDot,
    .gemm_mxfp4 = avx512::GemmMxfp4,
    .attend_rows = avx512::AttendRows,
    .attend_rows_bf16 = avx512::AttendRowsBf16,
    .attend_combine = avx512::AttendCombine,
    .indexer_scores = avx512::IndexerScores,
    .indexer_scores_bf16 = avx512::IndexerScoresBf16,
    .topk_set = RadixTopKSet,
    .gemm_fp8 = avx512::GemmFp8Dot,
};

// ... and with bf16 activations: one vdpbf16ps per product in the GEMMs (the attention keeps
// fp32 FMAs: the same bits as the fp32 table's).
constexpr KernelTable kAvx512DotBf16 = {
    .level = KernelLevel::kAvx512,
    .bf16_activations = GemmActivations::kBf16,
    .gemm_bf16 = avx512::GemmBf16DotX16,
    .gemm_f32 = avx512::GemmF32,
    .rms_norm = avx512::RmsNorm,
    .softmax = avx512::Softmax,
    .rope = avx512::Rope,
    .topk = avx512::TopK,
    .swiglu = avx512::SwiGlu,
    .attend = avx512::Attend,
    .gemm_bf16_packed = avx512::GemmBf16PackedDotX16,
    .gemm_mxfp4 = avx512::GemmMxfp4,
    .attend_rows = avx512::AttendRows,
    .attend_rows_bf16 = avx512::AttendRowsBf16,
    .attend_combine = avx512::AttendCombine,
    .indexer_scores = avx512::IndexerScores,
    .indexer_scores_bf16 = avx512::IndexerScoresBf16,
    .topk_set = RadixTopKSet,
    .gemm_fp8 = avx512::GemmFp8DotX16,
};

// Minimum output rows per worker before a GEMM is split (tiny GEMMs run inline).
constexpr int64_t kMinRowsPerWorker = 16;

template <typename W, typename Fn>
void ThreadedGemm(Fn fn, ThreadPool& pool, const float* x, int64_t m, int64_t k, const W* w,
                  int64_t n, float* y, GemmTiling t) {
  std::fill(y, y + m * n, std::numeric_limits<float>::quiet_NaN());
  if (pool.size() <= 1 || n < 2 * kMinRowsPerWorker || m * n * k < (1 << 16)) {
    fn(x, k, w, k, y, n, m, n, k, t);
    return;
  }
  pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int) {
    fn(x, k, w + lo * k, k, y + lo, n, m, hi - lo, k, t);
  });
}

}  // namespace

const KernelTable& WithGemmActivations(const KernelTable& t, GemmActivations a) {
  const bool x16 = a == GemmActivations::kBf16;
  switch (t.level) {
    case KernelLevel::kRef:
      return x16 ? kRefBf16 : kRefFp32;
    case KernelLevel::kAvx2:
      return x16 ? kAvx2Bf16 : kAvx2Fp32;
    case KernelLevel::kAvx512:
      if (GetCpuFeatures().avx512bf16) return x16 ? kAvx512DotBf16 : kAvx512DotFp32;
      return x16 ? kAvx512Bf16 : kAvx512Fp32;
  }
  return t;
}

Result<std::optional<KernelLevel>> ParseKernelLevel(std::string_view name) {
  if (name.empty()) return std::optional<KernelLevel>();
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (name == KernelLevelName(l)) return std::optional<KernelLevel>(l);
  }
  return InvalidArgument("--kernels: unknown level '{}' (ref, avx2, avx512)", name);
}

Result<GemmActivations> ParseGemmActivations(std::string_view name) {
  for (GemmActivations a : {GemmActivations::kFp32, GemmActivations::kBf16}) {
    if (name == GemmActivationsName(a)) return a;
  }
  return InvalidArgument("--gemm-activations: unknown '{}' (fp32, bf16)", name);
}

Result<const KernelTable*> ResolveKernels(std::optional<KernelLevel> level,
                                          GemmActivations activations) {
  const KernelTable* t = level ? GetKernelTable(*level) : &SelectKernels();
  if (t == nullptr) {
    return InvalidArgument("--kernels {}: not available on this CPU or in this build",
                           KernelLevelName(*level));
  }
  return &WithGemmActivations(*t, activations);
}

const KernelTable* GetKernelTable(KernelLevel level) {
  switch (level) {
    case KernelLevel::kRef:
      return &kRefFp32;
    case KernelLevel::kAvx2: {
      const CpuFeatures& f = GetCpuFeatures();
      return f.avx2 && f.fma ? &kAvx2Fp32 : nullptr;
    }
    case KernelLevel::kAvx512: {
      // The MXFP4 kernel needs VNNI (vpdpbusd) and VBMI (vpermb decodes the nibbles).
      const CpuFeatures& f = GetCpuFeatures();
      const bool ok = f.avx512_core() && f.avx512vnni && f.avx512vbmi && f.avx2 && f.fma;
      return ok ? &WithGemmActivations(kAvx512Fp32, GemmActivations::kFp32) : nullptr;
    }
    default:
      return nullptr;
  }
}

namespace {

// Deterministic inputs in [-1, 1) (a fixed LCG: the same on every machine).
std::vector<float> KnownInputs(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

bool Close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= tol * (1.0f + std::fabs(b[i])))) return false;  // NaN fails
  }
  return true;
}

}  // namespace

std::string KernelSelfTest(const KernelTable& t) {
  const KernelTable& r =
      WithGemmActivations(*GetKernelTable(KernelLevel::kRef), t.bf16_activations);
  constexpr int64_t m = 3, n = 21, k = 70;  // partial tiles and vectors everywhere
  constexpr float kTol = 1e-4f;             // fp32 sums of ≤ 70 terms in another order
  const auto x = KnownInputs(m * k, 1), wf = KnownInputs(n * k, 2);
  std::vector<uint16_t> wb(n * k);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = F32ToBf16(wf[i]);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto run2 = [&](auto fn_of, std::vector<float> want, std::vector<float> got) {
    fn_of(r, want);
    fn_of(t, got);
    return Close(got, want, kTol);
  };
  const std::vector<float> mn(m * n, nan);
  if (!run2(
          [&](const KernelTable& kt, std::vector<float>& y) {
            kt.gemm_bf16(x.data(), k, wb.data(), k, y.data(), n, m, n, k, {});
          },
          mn, mn)) {
    return "gemm_bf16";
  }
  if (!run2(
          [&](const KernelTable& kt, std::vector<float>& y) {
            kt.gemm_f32(x.data(), k, wf.data(), k, y.data(), n, m, n, k, {});
          },
          mn, mn)) {
    return "gemm_f32";
  }
  const std::vector<float> vk(k, nan);
  if (!run2([&](const KernelTable& kt,
                std::vector<float>& y) { kt.rms_norm(x.data(), wf.data(), 1e-5f, k, y.data()); },
            vk, vk)) {
    return "rms_norm";
  }
  if (!run2(
          [&](const KernelTable& kt, std::vector<float>& y) {
            for (int64_t i = 0; i < k; ++i) y[i] = 8.0f * x[i];
            y[5] = -std::numeric_limits<float>::infinity();
            kt.softmax(y.data(), k);
          },
          vk, vk)) {
    return "softmax";
  }
  if (!run2([&](const KernelTable& kt,
                std::vector<float>& y) { kt.swiglu(x.data(), wf.data(), k, y.data()); },
            vk, vk)) {
    return "swiglu";
  }
  for (bool interleave : {true, false}) {
    if (!run2(
            [&](const KernelTable& kt, std::vector<float>& y) {
              std::copy(x.begin(), x.begin() + k, y.begin());
              kt.rope(y.data(), k, wf.data(), wf.data() + k / 2, interleave);
            },
            vk, vk)) {
      return "rope";
    }
  }
  {
    std::vector<float> s(k);
    for (int64_t i = 0; i < k; ++i) s[i] = std::round(x[i] * 4.0f);  // many ties
    std::vector<int32_t> want(9), got(9, -1);
    r.topk(s.data(), k, 9, want.data());
    t.topk(s.data(), k, 9, got.data());
    if (got != want) return "topk";
  }
  {
    std::vector<const float*> ka(n), kb(n);
    for (int64_t i = 0; i < n; ++i) ka[i] = wf.data() + i * k, kb[i] = ka[i] + 60;
    std::vector<float> scratch(n);
    if (!run2(
            [&](const KernelTable& kt, std::vector<float>& y) {
              kt.attend(x.data(), x.data() + 60, 60, 10, ka.data(), kb.data(), ka.data(), 60, n,
                        0.3f, scratch.data(), y.data());
            },
            std::vector<float>(60, nan), std::vector<float>(60, nan))) {
      return "attend";
    }
  }
  {  // 5 rows (a partial row tile), 70 keys (a partial key block), limits 1..70
    constexpr int64_t kRows = 5, kKeys = 70, da = 20, db = 6, dv = 21;
    const auto q = KnownInputs(kRows * (da + db), 4), kv = KnownInputs(kKeys * (da + db + dv), 5);
    std::vector<const float*> ka(kKeys), kb(kKeys), vv(kKeys);
    for (int64_t i = 0; i < kKeys; ++i) {
      ka[i] = kv.data() + i * (da + db + dv), kb[i] = ka[i] + da, vv[i] = kb[i] + db;
    }
    const std::vector<int64_t> lim = {1, 33, 64, 65, 70};
    std::vector<float> scratch(AttendRowsScratch(kRows, dv));
    const std::vector<uint64_t> even(kRows * 2, 0x5555555555555555ull);  // keys 0, 2, 4, ...
    for (const uint64_t* mask : {static_cast<const uint64_t*>(nullptr), even.data()}) {
      if (!run2(
              [&](const KernelTable& kt, std::vector<float>& y) {
                kt.attend_rows(q.data(), da + db, q.data() + da, da + db, kRows, da, db, ka.data(),
                               kb.data(), vv.data(), dv, kKeys, lim.data(), mask, 2, 2.0f,
                               scratch.data(), y.data(), dv, nullptr);
              },
              std::vector<float>(kRows * dv, nan), std::vector<float>(kRows * dv, nan))) {
        return "attend_rows";
      }
    }
  }
  {
    constexpr int64_t hi = 3, di = 20, nk = 37;
    const auto q = KnownInputs(hi * di, 6), w = KnownInputs(hi, 7), keys = KnownInputs(nk * di, 8);
    std::vector<float> panels(IndexerPanelFloats(nk, di), 0.0f);
    for (int64_t i = 0; i < nk; ++i) {
      for (int64_t d = 0; d < di; ++d) panels[IndexerPanelIndex(i, d, di)] = keys[i * di + d];
    }
    if (!run2(
            [&](const KernelTable& kt, std::vector<float>& y) {
              kt.indexer_scores(q.data(), w.data(), hi, di, panels.data(), nk, 0.5f, y.data());
            },
            std::vector<float>(nk, nan), std::vector<float>(nk, nan))) {
      return "indexer_scores";
    }
  }
  {
    std::vector<float> s(k);
    for (int64_t i = 0; i < k; ++i) s[i] = std::round(x[i] * 4.0f);  // many ties
    std::vector<int32_t> want(9), got(9, -1), scratch(TopKSetScratch(k));
    r.topk_set(s.data(), k, 9, want.data(), scratch.data());
    t.topk_set(s.data(), k, 9, got.data(), scratch.data());
    if (got != want) return "topk_set";
  }
  if (t.gemm_bf16_packed != nullptr) {
    std::vector<uint16_t> wp(Bf16PackedElems(n, k));
    PackBf16(wb.data(), k, n, k, wp.data());
    std::vector<float> want(m * n, nan), got(m * n, nan);
    r.gemm_bf16_packed(x.data(), k, m, wp.data(), k, 0, n, want.data(), n, {});
    t.gemm_bf16_packed(x.data(), k, m, wp.data(), k, 0, n, got.data(), n, {});
    if (!Close(got, want, kTol)) return "gemm_bf16_packed";
  }
  if (t.gemm_mxfp4 != nullptr) {
    constexpr int64_t kq = 96;  // 3 blocks of 32
    std::vector<uint8_t> wq(n * kq / 2), we(n * kq / 32);
    for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<uint8_t>(i * 37 + 11);
    for (size_t i = 0; i < we.size(); ++i) we[i] = static_cast<uint8_t>(124 + i % 6);
    std::vector<uint8_t> pq(Mxfp4PackedCodeBytes(n, kq)), pe(Mxfp4PackedScaleBytes(n, kq));
    PackMxfp4(wq.data(), we.data(), n, kq, pq.data(), pe.data());
    std::vector<BlockQ8> q(m * kq / 32);
    const auto xq = KnownInputs(m * kq, 3);
    for (int64_t i = 0; i < m; ++i) QuantizeRowQ8(xq.data() + i * kq, kq, q.data() + i * kq / 32);
    std::vector<float> want(m * n, nan), got(m * n, nan);
    ref::GemmMxfp4(q.data(), m, pq.data(), pe.data(), kq, 0, n, want.data(), n, {});
    t.gemm_mxfp4(q.data(), m, pq.data(), pe.data(), kq, 0, n, got.data(), n, {});
    if (!Close(got, want, kTol)) return "gemm_mxfp4";
  }
  if (t.gemm_fp8 != nullptr) {
    // 21 rows (a partial group), codes
    // below 2 in magnitude (subnormals included) so that the fp32 reordering stays within kTol.
    constexpr int64_t k8 = 202, kb = 2;  // 202: a partial block and quad
    std::vector<uint8_t> w8(n * k8);
    for (size_t i = 0; i < w8.size(); ++i) w8[i] = static_cast<uint8_t>(i * 37 + 11) & 0xbf;
    const auto sf = KnownInputs(kb, 9);
    const auto x8 = KnownInputs(m * k8, 10);
    std::vector<uint8_t> wp(Fp8PackedBytes(n, k8));
    std::vector<float> sp(Fp8PackedScales(n, k8));
    PackFp8(w8.data(), k8, sf.data(), 0, n, k8, wp.data(), sp.data());
    std::vector<float> want(m * n, nan), got(m * n, nan);
    r.gemm_fp8(x8.data(), k8, m, wp.data(), sp.data(), k8, 0, n, want.data(), n, {});
    t.gemm_fp8(x8.data(), k8, m, wp.data(), sp.data(), k8, 0, n, got.data(), n, {});
    if (!Close(got, want, kTol)) return "gemm_fp8";
  }
  return "";
}

const KernelTable& SelectKernels() {
  static const KernelTable* chosen = [] {
    const char* cap = std::getenv("MX_KERNELS");
    const bool ref_only = cap != nullptr && std::string_view(cap) == "ref";
    const CpuFeatures& f = GetCpuFeatures();
    // The fastest level the CPU has whose every entry also gives the ref's answers on a known
    // input (a miscompiled or mis-dispatched kernel is caught here, not in the outputs).
    auto usable = [](const KernelTable* t) {
      if (t == nullptr) return false;
      const std::string bad = KernelSelfTest(*t);
      if (bad.empty()) return true;
      MX_LOG_WARN("kernels: the {} level's {} failed its known-answer self-test; not used",
                  KernelLevelName(t->level), bad);
      return false;
    };
    if (!ref_only && f.avx512_core()) {
      if (const KernelTable* t = GetKernelTable(KernelLevel::kAvx512); usable(t)) return t;
    }
    if (!ref_only && f.avx2 && f.fma) {
      if (const KernelTable* t = GetKernelTable(KernelLevel::kAvx2); usable(t)) return t;
    }
    return GetKernelTable(KernelLevel::kRef);
  }();
  return *chosen;
}

void GemmBf16(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
              const uint16_t* w, int64_t n, float* y, GemmTiling t) {
  ThreadedGemm(kt.gemm_bf16, pool, x, m, k, w, n, y, t);
}

void GemmF32(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m, int64_t k,
             const float* w, int64_t n, float* y, GemmTiling t) {
  ThreadedGemm(kt.gemm_f32, pool, x, m, k, w, n, y, t);
}

}  // namespace mx
