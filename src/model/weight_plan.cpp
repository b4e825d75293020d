// The weight plan: LoadModelWeights's allocations, worked out from the headers (weight_plan.h).
#include "model/weight_plan.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

#include "kernels/bf16_packed.h"
#include "kernels/fp8.h"
#include "kernels/mxfp4.h"
#include "model/weight_format.h"
#include "model/weights.h"

namespace mx {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The rows in the order the plan lists them.
enum Row : uint8_t { kRowBf16, kRowF16, kRowF32, kRowMxfp4, kRowFp8, kVectors, kDerived, kNumRows };
constexpr std::array<const char*, kNumRows> kRowName = {"bf16", "f16",     "f32",    "mxfp4",
                                                        "fp8",  "vectors", "derived"};
constexpr std::array<const char*, kNumRows> kRowWhere = {
    "repacked into 16-row groups (a copy)",
    "converted to f32 (a copy)",
    "copied as f32",
    "repacked into 16-row groups with their E8M0 scales (a copy)",
    "packed into 16-row groups (a copy); the stored codes stay mapped, read only at load",
    "norms and biases copied as f32",
    "MLA's absorbed key weight per layer, computed at load",
};

// How the loader cuts one tensor for the shard (weights.cpp Loader).
struct Cut {
  enum Kind : uint8_t { kWhole, kRows, kCols, kSkip } kind = kWhole;
  int64_t first = 0, count = 0;
};

// Expert e of a name "...mlp.experts.{e}.<rest>", else -1.
int64_t ExpertOf(std::string_view name) {
  constexpr std::string_view kKey = ".mlp.experts.";
  const size_t at = name.find(kKey);
  if (at == std::string_view::npos) return -1;
  const char* first = name.data() + at + kKey.size();
  int64_t e = -1;
  const auto [end, ec] = std::from_chars(first, name.data() + name.size(), e);
  return ec == std::errc() && end != first ? e : -1;
}

Cut CutOf(const ModelConfig& c, const ModelShard& s, const TensorSpec& spec) {
  const std::string& name = spec.name;
  if (spec.shape.size() != 2) return {};
  const int64_t n = spec.shape[0], k = spec.shape[1];
  const int64_t H = c.num_attention_heads, Hl = s.Count(H), h0 = s.First(H);
  auto rows = [&](int64_t first, int64_t count) {
    return first == 0 && count == n ? Cut{} : Cut{Cut::kRows, first, count};
  };
  auto cols = [&](int64_t first, int64_t count) {
    return first == 0 && count == k ? Cut{} : Cut{Cut::kCols, first, count};
  };
  if (name == "lm_head.weight") {
    const int64_t vb = s.VocabBlock(n), v0 = std::min<int64_t>(n, s.rank * vb);
    return rows(v0, std::min<int64_t>(n, v0 + vb) - v0);
  }
  if (EndsWith(name, ".self_attn.q_b_proj.weight"))
    return rows(h0 * c.qk_head_dim(), Hl * c.qk_head_dim());
  if (EndsWith(name, ".self_attn.kv_b_proj.weight")) {
    const int64_t Dkv = c.qk_nope_head_dim + c.v_head_dim;
    return rows(h0 * Dkv, Hl * Dkv);
  }
  if (EndsWith(name, ".self_attn.o_proj.weight")) return cols(h0 * c.v_head_dim, Hl * c.v_head_dim);
  const bool mlp = name.find(".mlp.") != std::string::npos && !EndsWith(name, ".mlp.gate.weight");
  if (!mlp) return {};
  const int64_t e = ExpertOf(name);
  if (e >= 0) {
    if (!s.OwnsExpert(e, c.n_routed_experts)) return {Cut::kSkip, 0, 0};
    if (s.expert_parallel) return {};
  }
  // A SwiGLU block split along its width F: gate / up by rows, down by columns.
  const bool down = EndsWith(name, "down_proj.weight");
  const int64_t F = down ? k : n;
  return down ? cols(s.First(F), s.Count(F)) : rows(s.First(F), s.Count(F));
}

// Bytes of the packed forms (weight_format.cpp) of a W [n, k].
int64_t PackedBf16Bytes(int64_t n, int64_t k) { return 2 * Bf16PackedElems(n, k); }
int64_t PackedMxfp4Bytes(int64_t n, int64_t k) {
  return Mxfp4PackedCodeBytes(n, k) + Mxfp4PackedScaleBytes(n, k);
}
int64_t PackedFp8Bytes(int64_t n, int64_t k) {
  return Fp8PackedBytes(n, k) + 4 * Fp8PackedScales(n, k);
}
// FP8 scale rows of n weight rows starting at row phase (0..127) of a block row.
int64_t Fp8ScaleBytes(int64_t phase, int64_t n, int64_t k) {
  return 4 * ((phase + n + kFp8Block - 1) / kFp8Block) * Fp8ScaleCols(k);
}

struct TensorCost {
  int64_t anon = 0, mapped = 0, transient = 0;
};

// A matrix's cost in the format it loads into, cut as `cut` says.
TensorCost MatrixCost(Row row, const TensorMatch& m, const Cut& cut) {
  const int64_t n = m.spec->shape[0], k = m.spec->shape[1];
  const int64_t ln = cut.kind == Cut::kRows ? cut.count : n;
  const int64_t lk = cut.kind == Cut::kCols ? cut.count : k;
  const bool sliced = cut.kind == Cut::kRows || cut.kind == Cut::kCols;
  TensorCost t;
  switch (row) {
    case kRowBf16: {
      const bool aligned = reinterpret_cast<uintptr_t>(m.view->data) % 2 == 0;
      t.anon = PackedBf16Bytes(ln, lk);
      t.transient = aligned ? 0 : static_cast<int64_t>(m.view->nbytes);
      // Sliced: the whole packed form and the slice unpacked to rows beside the result.
      if (sliced) t.transient = std::max(t.transient, PackedBf16Bytes(n, k) + 2 * ln * lk);
      break;
    }
    case kRowF16:
    case kRowF32:
      t.anon = 4 * ln * lk;
      if (sliced) t.transient = 4 * n * k;
      break;
    case kRowMxfp4:
      t.anon = PackedMxfp4Bytes(ln, lk);
      // The codes reordered to split-half rows before packing; sliced: the whole packed form and
      // the rows unpacked (all of them for a column slice) beside the result.
      t.transient = static_cast<int64_t>(m.view->nbytes);
      if (sliced) {
        const int64_t un = cut.kind == Cut::kCols ? n : ln;
        t.transient = std::max(
            t.transient, PackedMxfp4Bytes(n, k) + un * (k / 2 + k / 32) + ln * (lk / 2 + lk / 32));
      }
      break;
    case kRowFp8: {
      const bool scales_mapped = reinterpret_cast<uintptr_t>(m.scale->data) % 4 == 0;
      t.anon = PackedFp8Bytes(ln, lk);
      if (cut.kind == Cut::kCols) {
        // ColsFp8: codes and scales of the columns copied, then packed.
        t.anon += ln * lk + Fp8ScaleBytes(0, ln, lk);
      } else if (scales_mapped) {
        const int64_t phase = cut.kind == Cut::kRows ? cut.first % kFp8Block : 0;
        t.mapped = ln * lk + Fp8ScaleBytes(phase, ln, lk);
      } else if (cut.kind == Cut::kRows) {
        // Misaligned scales are copied, so a row slice copies its codes and scales too.
        t.anon += ln * lk + Fp8ScaleBytes(cut.first % kFp8Block, ln, lk);
      } else {
        t.anon += static_cast<int64_t>(m.scale->numel()) * 4;
        t.mapped = ln * lk;
      }
      if (sliced) t.transient = PackedFp8Bytes(n, k) + (scales_mapped ? 0 : Fp8ScaleBytes(0, n, k));
      break;
    }
    default:
      break;
  }
  return t;
}

Row RowOf(const TensorMatch& m) {
  if (m.spec->shape.size() != 2) return kVectors;
  switch (m.format) {
    case WeightFormat::kF16:
      return kRowF16;
    case WeightFormat::kF32:
      return kRowF32;
    case WeightFormat::kMXFP4:
      return kRowMxfp4;
    case WeightFormat::kFP8:
      return kRowFp8;
    default:
      return kRowBf16;
  }
}

}  // namespace

Result<WeightPlan> PlanWeights(const ModelConfig& config, const Checkpoint& ckpt,
                               const ModelShard& shard) {
  const std::vector<TensorSpec> specs = ExpectedTensors(config);
  MX_ASSIGN_OR_RETURN(const CheckpointReport report, CheckLoadable(config, specs, ckpt, shard));
  std::array<WeightFormatPlan, kNumRows> rows;
  WeightPlan plan;
  plan.shard = shard;
  for (const TensorMatch& m : report.matches) {
    const Row row = RowOf(m);
    const Cut cut = CutOf(config, shard, *m.spec);
    if (cut.kind == Cut::kSkip) continue;
    if (cut.kind == Cut::kCols) {
      const LinearFormat* f = FormatForFileDtype(m.view->dtype);
      MX_RETURN_IF_ERROR(CheckColSlice(*f, m.spec->shape[1], cut.first, cut.count, m.spec->name));
    }
    WeightFormatPlan& r = rows[row];
    ++r.tensors;
    r.file_bytes += static_cast<int64_t>(m.view->nbytes + (m.scale ? m.scale->nbytes : 0));
    TensorCost t;
    if (row == kVectors) {
      t.anon = 4 * m.view->numel();
    } else {
      t = MatrixCost(row, m, cut);
    }
    r.anon_bytes += t.anon;
    r.mapped_bytes += t.mapped;
    plan.largest_transient_bytes = std::max(plan.largest_transient_bytes, t.transient);
    if (EndsWith(m.spec->name, ".self_attn.kv_b_proj.weight")) {
      // AbsorbedKeyWeight: [Hl·Rkv, Dn], bf16 when kv_b_proj is, else f32.
      const int64_t Hl = shard.Count(config.num_attention_heads);
      WeightFormatPlan& d = rows[kDerived];
      ++d.tensors;
      d.anon_bytes += Hl * config.kv_lora_rank * config.qk_nope_head_dim *
                      (m.format == WeightFormat::kBF16 ? 2 : 4);
    }
  }
  for (int i = 0; i < kNumRows; ++i) {
    WeightFormatPlan& r = rows[i];
    if (r.tensors == 0) continue;
    r.format = kRowName[i];
    r.where = kRowWhere[i];
    plan.file_bytes += r.file_bytes;
    plan.anon_bytes += r.anon_bytes;
    plan.mapped_bytes += r.mapped_bytes;
    if (i != kDerived) plan.tensors += r.tensors;
    plan.formats.push_back(std::move(r));
  }
  return plan;
}

}  // namespace mx
