// CPU feature detection (CPUID + XGETBV for OS-enabled register state), exposed to the
// kernel dispatcher. Detected once; `MX_CPU_MAX=avx2|scalar` style overrides live in the
// dispatcher, not here.
#pragma once

#include <string>

namespace mx {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx512vbmi = false;
  bool avx_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;

  // All of F, BW, VL, DQ: what the avx512 kernels need at minimum.
  bool avx512_core() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  // "avx2 fma f16c avx512f ... " for logs and `inspect`.
  std::string ToString() const;
};

// Detected once per process (thread-safe).
const CpuFeatures& GetCpuFeatures();

}  // namespace mx
