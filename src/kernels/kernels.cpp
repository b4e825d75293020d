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
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"
#include "base/log.h"
#include "base/numerics.h"
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

constexpr KernelTable kRefTable = {
    .level = KernelLevel::kRef,
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
    .indexer_scores = ref::IndexerScores,
    .indexer_scores_bf16 = ref::IndexerScoresBf16,
    .topk_set = ref::TopKSet,
    .gemm_fp8 = ref::GemmFp8,
};

// The AVX2 table with its MXFP4 kernel; the AVX-512 table with the AVX-512 VNNI MXFP4 kernel
// and, where the CPU has AVX512_BF16, the vdpbf16ps bf16 GEMM.
const KernelTable& Avx2WithMxfp4() {
  static const KernelTable t = [] {
    KernelTable k = Avx2KernelTable();
    k.gemm_mxfp4 = avx2::GemmMxfp4;
    k.gemm_bf16_packed = avx2::GemmBf16Packed;
    k.gemm_fp8 = avx2::GemmFp8;
    k.attend_rows = avx2::AttendRows;
    k.attend_rows_bf16 = avx2::AttendRowsBf16;
    k.indexer_scores = avx2::IndexerScores;
    k.indexer_scores_bf16 = avx2::IndexerScoresBf16;
    k.topk_set = RadixTopKSet;
    return k;
  }();
  return t;
}

const KernelTable& Avx512WithMxfp4() {
  static const KernelTable t = [] {
    KernelTable k = Avx512KernelTable();
    k.gemm_mxfp4 = avx512::GemmMxfp4;
    k.gemm_fp8 = avx2::GemmFp8;
    k.attend_rows = avx512::AttendRows;
    k.attend_rows_bf16 = avx512::AttendRowsBf16;
    k.indexer_scores = avx512::IndexerScores;
    k.indexer_scores_bf16 = avx512::IndexerScoresBf16;
    k.topk_set = RadixTopKSet;
    k.gemm_bf16_packed = avx512::GemmBf16PackedFma;
    if (GetCpuFeatures().avx512bf16) {
      k.gemm_bf16 = avx512::GemmBf16Dot;
      k.gemm_bf16_packed = avx512::GemmBf16PackedDot;
      k.gemm_fp8 = avx512::GemmFp8Dot;
    }
    return k;
  }();
  return t;
}

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

// A level's fp32-activation bf16 GEMM run on x rounded to bf16 (levels without vdpbf16ps):
// the rounding is the whole difference from GemmActivations::kFp32.
template <const KernelTable& (*Table)()>
void RoundXThenGemm(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y,
                    int64_t ldy, int64_t m, int64_t n, int64_t k, GemmTiling t) {
  thread_local std::vector<float> xr;
  if (xr.size() < static_cast<size_t>(m * k)) xr.resize(m * k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) xr[i * k + j] = Bf16ToF32(F32ToBf16(x[i * ldx + j]));
  }
  Table().gemm_bf16(xr.data(), k, w, ldw, y, ldy, m, n, k, t);
}

// The same for the packed bf16 GEMM.
template <const KernelTable& (*Table)()>
void RoundXThenPacked(const float* x, int64_t ldx, int64_t m, const uint16_t* wp, int64_t k,
                      int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  thread_local std::vector<float> xr;
  if (xr.size() < static_cast<size_t>(m * k)) xr.resize(m * k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) xr[i * k + j] = Bf16ToF32(F32ToBf16(x[i * ldx + j]));
  }
  Table().gemm_bf16_packed(xr.data(), k, m, wp, k, r0, r1, y, ldy, t);
}

// The same for the packed FP8 GEMM.
template <const KernelTable& (*Table)()>
void RoundXThenFp8(const float* x, int64_t ldx, int64_t m, const uint8_t* wp, const float* sp,
                   int64_t k, int64_t r0, int64_t r1, float* y, int64_t ldy, GemmTiling t) {
  thread_local std::vector<float> xr;
  if (xr.size() < static_cast<size_t>(m * k)) xr.resize(m * k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) xr[i * k + j] = Bf16ToF32(F32ToBf16(x[i * ldx + j]));
  }
  Table().gemm_fp8(xr.data(), k, m, wp, sp, k, r0, r1, y, ldy, t);
}

const KernelTable& RefTable() { return kRefTable; }

template <const KernelTable& (*Base)()>
const KernelTable& X16Table() {
  static const KernelTable t = [] {
    KernelTable k = Base();
    k.bf16_activations = GemmActivations::kBf16;
    if (k.gemm_bf16 == avx512::GemmBf16Dot) {
      k.gemm_bf16 = avx512::GemmBf16DotX16;
      k.gemm_bf16_packed = avx512::GemmBf16PackedDotX16;
    } else if (k.level == KernelLevel::kRef) {
      k.gemm_bf16 = ref::GemmBf16X16;
      k.gemm_bf16_packed = ref::GemmBf16PackedX16;
    } else {
      k.gemm_bf16 = RoundXThenGemm<Base>;
      k.gemm_bf16_packed = RoundXThenPacked<Base>;
    }
    // The absorbed attention over a bf16 cache in vdpbf16ps where the CPU has it.
    if (k.gemm_bf16 == avx512::GemmBf16DotX16) k.attend_rows_bf16 = avx512::AttendRowsBf16Dot;
    if (k.gemm_fp8 == avx512::GemmFp8Dot) {
      k.gemm_fp8 = avx512::GemmFp8DotX16;
    } else if (k.level == KernelLevel::kRef) {
      k.gemm_fp8 = ref::GemmFp8X16;
    } else {
      k.gemm_fp8 = RoundXThenFp8<Base>;
    }
    return k;
  }();
  return t;
}

}  // namespace

const KernelTable& WithGemmActivations(const KernelTable& t, GemmActivations a) {
  const bool x16 = a == GemmActivations::kBf16;
  switch (t.level) {
    case KernelLevel::kRef:
      return x16 ? X16Table<RefTable>() : kRefTable;
    case KernelLevel::kAvx2:
      return x16 ? X16Table<Avx2WithMxfp4>() : Avx2WithMxfp4();
    case KernelLevel::kAvx512:
      return x16 ? X16Table<Avx512WithMxfp4>() : Avx512WithMxfp4();
  }
  return t;
}

Result<const KernelTable*> ResolveKernels(const std::string& level,
                                          const std::string& activations) {
  const KernelTable* t = level.empty() ? &SelectKernels() : nullptr;
  for (KernelLevel l : {KernelLevel::kRef, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (level != KernelLevelName(l)) continue;
    t = GetKernelTable(l);
    if (t == nullptr) {
      return InvalidArgument("--kernels {}: not available on this CPU or in this build", level);
    }
  }
  if (t == nullptr)
    return InvalidArgument("--kernels: unknown level '{}' (ref, avx2, avx512)", level);
  for (GemmActivations a : {GemmActivations::kFp32, GemmActivations::kBf16}) {
    if (activations == GemmActivationsName(a)) return &WithGemmActivations(*t, a);
  }
  return InvalidArgument("--gemm-activations: unknown '{}' (fp32, bf16)", activations);
}

const KernelTable* GetKernelTable(KernelLevel level) {
  switch (level) {
    case KernelLevel::kRef:
      return &kRefTable;
    case KernelLevel::kAvx2: {
      const CpuFeatures& f = GetCpuFeatures();
      return f.avx2 && f.fma ? &Avx2WithMxfp4() : nullptr;
    }
    case KernelLevel::kAvx512: {
      // The MXFP4 kernel needs VNNI (vpdpbusd) and VBMI (vpermb decodes the nibbles).
      const CpuFeatures& f = GetCpuFeatures();
      const bool ok = f.avx512_core() && f.avx512vnni && f.avx512vbmi && f.avx2 && f.fma;
      return ok ? &Avx512WithMxfp4() : nullptr;
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
    std::vector<float> scratch(AttendRowsScratch(kRows));
    const std::vector<uint64_t> even(kRows * 2, 0x5555555555555555ull);  // keys 0, 2, 4, ...
    for (const uint64_t* mask : {static_cast<const uint64_t*>(nullptr), even.data()}) {
      if (!run2(
              [&](const KernelTable& kt, std::vector<float>& y) {
                kt.attend_rows(q.data(), da + db, q.data() + da, da + db, kRows, da, db, ka.data(),
                               kb.data(), vv.data(), dv, kKeys, lim.data(), mask, 2, 2.0f,
                               scratch.data(), y.data(), dv);
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
