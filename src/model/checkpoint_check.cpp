// Per-tensor format detection and the missing / unexpected / mis-shaped check.
#include "model/checkpoint_check.h"

#include <unordered_set>

#include <fmt/format.h>

#include "base/regex.h"
#include "model/kv_scales.h"
#include "model/tensor_plan.h"

namespace mx {

const char* WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kMissing:
      return "missing";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kFP8:
      return "fp8";
    case WeightFormat::kMXFP4:
      return "mxfp4";
    case WeightFormat::kMismatch:
      return "mismatch";
  }
  return "?";
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

namespace {

std::string Describe(const TensorView& v) {
  return fmt::format("{} {}", DTypeName(v.dtype), ShapeString(v.shape));
}

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

CheckpointReport CheckCheckpoint(const ModelConfig& config, const std::vector<TensorSpec>& specs,
                                 const Checkpoint& ckpt) {
  CheckpointReport r;
  std::unordered_set<std::string_view> consumed;
  r.matches.reserve(specs.size());
  for (const auto& spec : specs) {
    TensorMatch m{&spec, ckpt.Find(spec.name), nullptr, WeightFormat::kMissing};
    if (m.view == nullptr) {
      r.missing.push_back(spec.name);
      r.matches.push_back(m);
      continue;
    }
    consumed.insert(m.view->name);
    const TensorView& v = *m.view;
    const bool is_linear = spec.shape.size() == 2 && EndsWith(spec.name, ".weight");
    const std::string base = spec.name.substr(0, spec.name.size() - 6);  // strip "weight"
    if (v.shape == spec.shape &&
        (v.dtype == DType::kBF16 || v.dtype == DType::kF16 || v.dtype == DType::kF32)) {
      m.format = v.dtype == DType::kBF16  ? WeightFormat::kBF16
                 : v.dtype == DType::kF16 ? WeightFormat::kF16
                                          : WeightFormat::kF32;
    } else if (is_linear && v.dtype == DType::kU8 && spec.shape[1] % 32 == 0 &&
               v.shape == std::vector<int64_t>{spec.shape[0], spec.shape[1] / 2}) {
      const TensorView* s = ckpt.Find(base + "weight_scale");
      const std::vector<int64_t> want{spec.shape[0], spec.shape[1] / 32};
      if (s != nullptr && s->dtype == DType::kU8 && s->shape == want) {
        m.format = WeightFormat::kMXFP4;
        m.scale = s;
        consumed.insert(s->name);
      } else {
        m.format = WeightFormat::kMismatch;
        r.mismatched.push_back(fmt::format(
            "{}: packed MXFP4 data {} needs {}weight_scale U8 {}, found {}", spec.name, Describe(v),
            base, ShapeString(want), s ? Describe(*s) : std::string("none")));
      }
    } else if (is_linear && v.dtype == DType::kF8_E4M3 && v.shape == spec.shape) {
      // The kernels (kernels/fp8.h) take exactly one F32 scale per 128 × 128 block.
      const TensorView* s = ckpt.Find(base + "weight_scale_inv");
      const std::vector<int64_t> block{CeilDiv(spec.shape[0], 128), CeilDiv(spec.shape[1], 128)};
      if (s != nullptr) consumed.insert(s->name);
      if (s != nullptr && s->dtype == DType::kF32 && s->shape == block) {
        m.format = WeightFormat::kFP8;
        m.scale = s;
      } else {
        m.format = WeightFormat::kMismatch;
        r.mismatched.push_back(
            fmt::format("{}: FP8 weight {} needs {}weight_scale_inv F32 {} (one scale per 128 x "
                        "128 block), found {}",
                        spec.name, Describe(v), base, ShapeString(block),
                        s ? Describe(*s) : std::string("none")));
      }
    } else {
      m.format = WeightFormat::kMismatch;
      r.mismatched.push_back(fmt::format("{}: expected {} {}, found {}", spec.name,
                                         DTypeName(spec.dtype), ShapeString(spec.shape),
                                         Describe(v)));
    }
    r.matches.push_back(m);
  }
  static const Regex kIndexer =
      Regex::Compile(R"(model\.layers\.\d+\.self_attn\.indexer\..*)").value();
  for (const TensorView* v : ckpt.tensors()) {
    if (consumed.count(v->name)) continue;
    if (IsKvScaleTensor(v->name, config)) {
      r.kv_scales.push_back(v->name);
      continue;
    }
    const int64_t layer =
        config.has_indexer && kIndexer.FullMatch(v->name) ? LayerOfTensor(v->name) : -1;
    if (layer >= 0 && layer < config.num_hidden_layers && !config.is_full_indexer_layer(layer)) {
      r.ignored.push_back(v->name);
      continue;
    }
    r.unexpected.push_back(v->name);
  }
  return r;
}

std::string CheckpointReport::ProblemSummary(size_t max_per_kind) const {
  std::string out;
  auto section = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out += fmt::format("{} {} tensor(s):\n", items.size(), title);
    for (size_t i = 0; i < items.size() && i < max_per_kind; ++i) out += "  " + items[i] + "\n";
    if (items.size() > max_per_kind) {
      out += fmt::format("  ... and {} more\n", items.size() - max_per_kind);
    }
  };
  section("missing", missing);
  section("mis-shaped", mismatched);
  section("unexpected", unexpected);
  return out;
}

}  // namespace mx
