// Kernel dispatch: one KernelTable per compiled level, the CPUID choice, and the threaded
// GEMM wrappers.
#include "kernels/kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "base/check.h"
#include "base/cpu_features.h"
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
    .gemm_mxfp4 = ref::GemmMxfp4,
};

// The AVX2 table with its MXFP4 kernel; the AVX-512 table with the AVX-512 VNNI MXFP4 kernel
// and, where the CPU has AVX512_BF16, the vdpbf16ps bf16 GEMM.
const KernelTable& Avx2WithMxfp4() {
  static const KernelTable t = [] {
    KernelTable k = Avx2KernelTable();
    k.gemm_mxfp4 = avx2::GemmMxfp4;
    return k;
  }();
  return t;
}

const KernelTable& Avx512WithMxfp4() {
  static const KernelTable t = [] {
    KernelTable k = Avx512KernelTable();
    k.gemm_mxfp4 = avx512::GemmMxfp4;
    if (GetCpuFeatures().avx512bf16) k.gemm_bf16 = avx512::GemmBf16Dot;
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

}  // namespace

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

const KernelTable& SelectKernels() {
  static const KernelTable* chosen = [] {
    const char* cap = std::getenv("MX_KERNELS");
    const bool ref_only = cap != nullptr && std::string_view(cap) == "ref";
    const CpuFeatures& f = GetCpuFeatures();
    if (!ref_only && f.avx512_core()) {
      if (const KernelTable* t = GetKernelTable(KernelLevel::kAvx512)) return t;
    }
    if (!ref_only && f.avx2 && f.fma) {
      if (const KernelTable* t = GetKernelTable(KernelLevel::kAvx2)) return t;
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
