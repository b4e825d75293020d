// KV-cache scales from a checkpoint (see kv_scales.h).
#include "model/kv_scales.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/numerics.h"
#include "base/regex.h"
#include "model/tensor_plan.h"

namespace mx {

namespace {

// The layer of a KV-scale tensor name, or -1 when `name` is not one (or its layer number does
// not fit an int64).
int64_t ScaleLayer(const std::string& name) {
  static const Regex re =
      Regex::Compile(R"(model\.layers\.\d+\.self_attn\.(attn\.k_scale|k_scale|)"
                     R"(attn\.kv_scale|kv_scale|kv_a_proj_with_mqa\.output_scale|)"
                     R"(attn\.v_scale|v_scale))")
          .value();
  return re.FullMatch(name) ? LayerOfTensor(name) : -1;
}

int64_t NumLayers(const ModelConfig& c) {
  return c.num_hidden_layers + (c.num_nextn_predict_layers > 0 ? 1 : 0);
}

Result<float> ReadScalar(const TensorView& v) {
  if (v.numel() != 1 || v.shape.size() > 1) {
    return InvalidArgument("KV scale {}: expected a scalar or shape [1], found {} values", v.name,
                           v.numel());
  }
  float x = 0;
  if (v.dtype == DType::kF32) {
    std::memcpy(&x, v.data, 4);
  } else if (v.dtype == DType::kBF16 || v.dtype == DType::kF16) {
    uint16_t h = 0;
    std::memcpy(&h, v.data, 2);
    x = v.dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
  } else {
    return InvalidArgument("KV scale {}: expected F32, BF16 or F16, found {}", v.name,
                           DTypeName(v.dtype));
  }
  if (!std::isfinite(x) || x <= 0) {
    return InvalidArgument("KV scale {}: {} is not a finite positive scale", v.name, x);
  }
  return x;
}

}  // namespace

bool IsKvScaleTensor(const std::string& name, const ModelConfig& c) {
  const int64_t layer = ScaleLayer(name);
  return layer >= 0 && layer < NumLayers(c);
}

Result<std::vector<float>> LoadKvScales(const Checkpoint& ckpt, const ModelConfig& c,
                                        std::string* warning) {
  const int64_t n = NumLayers(c);
  std::vector<float> scales(n, 0.0f);  // 0: none found
  for (const TensorView* v : ckpt.tensors()) {
    const int64_t layer = ScaleLayer(v->name);
    if (layer < 0 || layer >= n) continue;
    MX_ASSIGN_OR_RETURN(float x, ReadScalar(*v));
    scales[layer] = std::max(scales[layer], x);
  }
  const int64_t L = c.num_hidden_layers;
  std::vector<int64_t> with, without;
  for (int64_t l = 0; l < L; ++l) (scales[l] > 0 ? with : without).push_back(l);
  if (with.empty()) {
    if (n > L && scales[L] > 0) {
      return InvalidArgument("KV scales: only the MTP layer {} has one; the main layers have none",
                             L);
    }
    return std::vector<float>();
  }
  if (!without.empty()) {
    return InvalidArgument("KV scales: layers {} have one but layers {} do not (a partial export?)",
                           fmt::join(with, ","), fmt::join(without, ","));
  }
  if (n > L && scales[L] == 0) {
    scales[L] = 1.0f;
    if (warning != nullptr) {
      *warning = fmt::format("KV scales: the MTP layer {} has none; using 1.0 for it", L);
    }
  }
  return scales;
}

}  // namespace mx
