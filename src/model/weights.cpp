// Weight loading by HF name (see weights.h).
#include "model/weights.h"

#include <cstring>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "base/check.h"
#include "base/numerics.h"
#include "model/checkpoint_check.h"
#include "model/tensor_plan.h"
#include "model/weight_format.h"
#include "quant/exclude.h"
#include "quant/quark_config.h"

namespace mx {

float LinearWeight::at(int64_t row, int64_t col) const {
  return FormatOf(*this).at(*this, row, col);
}

LinearWeight AbsorbedKeyWeight(const LinearWeight& kv_b, const ModelConfig& c, int64_t heads) {
  const int64_t H = heads, Dn = c.qk_nope_head_dim, Rkv = c.kv_lora_rank,
                Dkv = c.qk_nope_head_dim + c.v_head_dim;
  LinearWeight t;
  t.n = H * Rkv;
  t.k = Dn;
  if (kv_b.dtype == DType::kBF16) {
    t.dtype = DType::kBF16;
    t.owned_bf16.resize(t.n * t.k);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < Dn; ++d) {
        for (int64_t j = 0; j < Rkv; ++j) {  // bf16 → fp32 → bf16 is exact
          t.owned_bf16[(h * Rkv + j) * Dn + d] = F32ToBf16(kv_b.at(h * Dkv + d, j));
        }
      }
    }
    t.bf16 = t.owned_bf16.data();
  } else {
    t.dtype = DType::kF32;
    t.owned_f32.resize(t.n * t.k);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < Dn; ++d) {
        for (int64_t j = 0; j < Rkv; ++j) {
          t.owned_f32[(h * Rkv + j) * Dn + d] = kv_b.at(h * Dkv + d, j);
        }
      }
    }
    t.f32 = t.owned_f32.data();
  }
  return t;
}

LinearWeight LinearWeight::Rows(int64_t first, int64_t count) const {
  MX_CHECK_LE(first + count, n);
  return FormatOf(*this).rows(*this, first, count, /*copy=*/false);
}

LinearWeight SliceRows(LinearWeight w, int64_t first, int64_t count) {
  MX_CHECK_LE(first + count, w.n);
  if (first == 0 && count == w.n) return w;
  const bool owned = !w.owned_f32.empty() || !w.owned_bf16.empty() || !w.owned_mx_q.empty() ||
                     !w.owned_fp8_s.empty() || !w.owned_fp8p.empty();
  return FormatOf(w).rows(w, first, count, /*copy=*/owned);
}

Status CheckColSlice(const LinearFormat& f, int64_t k, int64_t first, int64_t count,
                     const std::string& name) {
  const bool partial_end = f.dtype == DType::kF8_E4M3 && first + count == k;
  if (first % f.block != 0 || (count % f.block != 0 && !partial_end)) {
    return InvalidArgument(
        "{}: {} weight split along its input at columns [{}, {}), which is not a multiple "
        "of the {}-element block; choose a --tp / --ep that keeps each slice {}-aligned",
        name, f.name, first, first + count, f.block, f.block);
  }
  return Status::Ok();
}

Result<LinearWeight> SliceCols(const LinearWeight& w, int64_t first, int64_t count,
                               const std::string& name) {
  MX_CHECK_LE(first + count, w.k);
  const LinearFormat& f = FormatOf(w);
  MX_RETURN_IF_ERROR(CheckColSlice(f, w.k, first, count, name));
  return f.cols(w, first, count);
}

void Linear(const KernelTable& kt, ThreadPool& pool, const float* x, int64_t m,
            const LinearWeight& w, float* y, GemmTiling t) {
  MX_CHECK(!w.empty());
  FormatOf(w).gemm(kt, pool, x, m, w, y, t);
}

void ModelWeights::Embed(int64_t token, float* out) const {
  MX_CHECK(token >= 0 && token < embed_tokens.n);
  const LinearFormat& f = FormatOf(embed_tokens);
  for (int64_t i = 0; i < embed_tokens.k; ++i) out[i] = f.at(embed_tokens, token, i);
}

namespace {

// Whether any of w's arrays lies in t's bytes (w is, or holds, a view of the mapped tensor).
bool PointsInto(const LinearWeight& w, const TensorView& t) {
  const auto in = [&](const void* p) {
    const auto* b = static_cast<const uint8_t*>(p);
    return b != nullptr && b >= t.data && b < t.data + t.nbytes;
  };
  return in(w.bf16) || in(w.bf16p) || in(w.f32) || in(w.mx_q) || in(w.mx_e) || in(w.fp8) ||
         in(w.fp8_s) || in(w.fp8p) || in(w.fp8p_s);
}

// Looks tensors up after CheckCheckpoint has validated names, shapes and dtypes.
class Loader {
 public:
  Loader(const Checkpoint& ckpt, const ModelShard& shard, LoadProgress* progress)
      : ckpt_(ckpt), shard_(shard), progress_(progress) {}

  const TensorView& View(const std::string& name) {
    const TensorView* v = ckpt_.Find(name);
    MX_CHECK_MSG(v != nullptr, name);  // CheckCheckpoint guarantees presence
    return *v;
  }

  // Once a tensor (and its scale) is read: counted, and its pages dropped from the resident set
  // so that the mapping does not hold a second copy of the weights (views into it stay valid
  // and map back in). A tensor the loaded weight `w` points into (e.g. FP8 codes used in place)
  // is noted, so that DropCopied keeps it cached.
  void Done(const TensorView& v, const TensorView* scale, const LinearWeight* w = nullptr) {
    const auto release = [&](const TensorView& t) {
      if (w != nullptr && PointsInto(*w, t)) viewed_.insert(&t);
      ReleaseTensorPages(t);
    };
    release(v);
    if (scale != nullptr) release(*scale);
    if (progress_ != nullptr) {
      progress_->Add(static_cast<int64_t>(v.nbytes + (scale != nullptr ? scale->nbytes : 0)));
    }
  }

  // After the load of a whole model: every run of file-adjacent tensors that no weight views is
  // evicted from the page cache in one range (pages or larger folios two copied tensors share
  // included), so that the checkpoint does not sit in memory beside its copy until the kernel
  // reclaims it under the running model. Not for a split model: the other ranks read the same
  // file's pages.
  void DropCopied() const {
    if (!shard_.whole()) return;
    for (const auto& f : ckpt_.files()) {
      const TensorView* first = nullptr;
      const TensorView* last = nullptr;
      const auto flush = [&] {
        if (first != nullptr && first->map != nullptr) {
          const auto n = static_cast<size_t>(last->data + last->nbytes - first->data);
          ReleaseMappedPages(first->data, n);  // the pages two tensors share, mapped by both
          first->map->DropCache(first->data, n);
        }
        first = last = nullptr;
      };
      for (const TensorView& t : f->tensors()) {  // in file order
        if (viewed_.contains(&t)) {
          flush();
        } else {
          if (first == nullptr) first = &t;
          last = &t;
        }
      }
      flush();
    }
  }

  // Any float tensor as an fp32 vector.
  Result<std::vector<float>> Vector(const std::string& name) {
    const TensorView& v = View(name);
    std::vector<float> out(v.numel());
    for (int64_t i = 0; i < v.numel(); ++i) {
      uint16_t h;
      switch (v.dtype) {
        case DType::kBF16:
          std::memcpy(&h, v.data + 2 * i, 2);
          out[i] = Bf16ToF32(h);
          break;
        case DType::kF16:
          std::memcpy(&h, v.data + 2 * i, 2);
          out[i] = F16ToF32(h);
          break;
        case DType::kF32:
          std::memcpy(&out[i], v.data + 4 * i, 4);
          break;
        default:
          return Unimplemented("{}: dtype {} is not supported for a vector (want BF16/F16/F32)",
                               name, DTypeName(v.dtype));
      }
    }
    Done(v, nullptr);
    return out;
  }

  Result<LinearWeight> Matrix(const std::string& name) {
    const TensorView& v = View(name);
    if (v.shape.size() != 2) return InvalidArgument("{}: expected a 2-d weight", name);
    const LinearFormat* f = FormatForFileDtype(v.dtype);
    if (f == nullptr) {
      return Unimplemented("{}: dtype {} weights are not supported by the CPU forward yet", name,
                           DTypeName(v.dtype));
    }
    // MXFP4's and FP8's scales: checked by CheckCheckpoint and CheckQuantization.
    const TensorView* scale = f->codec != nullptr ? &View(name + f->codec->scale_suffix) : nullptr;
    LinearWeight w = f->load(v, scale);
    Done(v, scale, &w);
    return w;
  }

  // Output rows [first, first + count) of a column-parallel weight.
  Result<LinearWeight> ColumnParallel(const std::string& name, int64_t first, int64_t count) {
    MX_ASSIGN_OR_RETURN(LinearWeight w, Matrix(name));
    return SliceRows(std::move(w), first, count);
  }
  // Input columns [first, first + count) of a row-parallel weight.
  Result<LinearWeight> RowParallel(const std::string& name, int64_t first, int64_t count) {
    MX_ASSIGN_OR_RETURN(LinearWeight w, Matrix(name));
    if (first == 0 && count == w.k) return w;
    return SliceCols(w, first, count, name);
  }

  // A SwiGLU block; `split`: this rank's slice of its width (else the whole block).
  Result<MlpWeights> Mlp(const std::string& p, bool split) {
    MlpWeights m;
    const int64_t F = View(p + "gate_proj.weight").shape[0];
    const int64_t f0 = split ? shard_.First(F) : 0, fn = split ? shard_.Count(F) : F;
    MX_ASSIGN_OR_RETURN(m.gate_proj, ColumnParallel(p + "gate_proj.weight", f0, fn));
    MX_ASSIGN_OR_RETURN(m.up_proj, ColumnParallel(p + "up_proj.weight", f0, fn));
    MX_ASSIGN_OR_RETURN(m.down_proj, RowParallel(p + "down_proj.weight", f0, fn));
    return m;
  }

  Result<LayerWeights> Layer(const ModelConfig& c, int64_t i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LayerWeights l;
    MX_ASSIGN_OR_RETURN(l.input_layernorm, Vector(p + "input_layernorm.weight"));
    MX_ASSIGN_OR_RETURN(l.post_attention_layernorm, Vector(p + "post_attention_layernorm.weight"));
    const std::string a = p + "self_attn.";
    AttentionWeights& at = l.attn;
    const int64_t H = c.num_attention_heads, Hl = shard_.Count(H), h0 = shard_.First(H);
    const int64_t Dq = c.qk_nope_head_dim + c.qk_rope_head_dim,
                  Dkv = c.qk_nope_head_dim + c.v_head_dim;
    at.heads = Hl;
    MX_ASSIGN_OR_RETURN(at.q_a_proj, Matrix(a + "q_a_proj.weight"));
    MX_ASSIGN_OR_RETURN(at.q_a_layernorm, Vector(a + "q_a_layernorm.weight"));
    MX_ASSIGN_OR_RETURN(at.q_b_proj, ColumnParallel(a + "q_b_proj.weight", h0 * Dq, Hl * Dq));
    MX_ASSIGN_OR_RETURN(at.kv_a_proj_with_mqa, Matrix(a + "kv_a_proj_with_mqa.weight"));
    MX_ASSIGN_OR_RETURN(at.kv_a_layernorm, Vector(a + "kv_a_layernorm.weight"));
    MX_ASSIGN_OR_RETURN(at.kv_b_proj, ColumnParallel(a + "kv_b_proj.weight", h0 * Dkv, Hl * Dkv));
    at.kv_b_uk_t = AbsorbedKeyWeight(at.kv_b_proj, c, Hl);
    ReleaseTensorPages(View(a + "kv_b_proj.weight"));  // an FP8 kv_b_proj's codes were read again
    MX_ASSIGN_OR_RETURN(at.o_proj,
                        RowParallel(a + "o_proj.weight", h0 * c.v_head_dim, Hl * c.v_head_dim));
    l.has_indexer = c.is_full_indexer_layer(i);
    if (l.has_indexer) {
      const std::string x = a + "indexer.";
      IndexerWeights& ix = l.indexer;
      MX_ASSIGN_OR_RETURN(ix.wq_b, Matrix(x + "wq_b.weight"));
      MX_ASSIGN_OR_RETURN(ix.wk, Matrix(x + "wk.weight"));
      MX_ASSIGN_OR_RETURN(ix.k_norm_weight, Vector(x + "k_norm.weight"));
      MX_ASSIGN_OR_RETURN(ix.k_norm_bias, Vector(x + "k_norm.bias"));
      MX_ASSIGN_OR_RETURN(ix.weights_proj, Matrix(x + "weights_proj.weight"));
    }
    l.is_moe = c.is_moe_layer(i);
    const std::string m = p + "mlp.";
    if (!l.is_moe) {
      MX_ASSIGN_OR_RETURN(l.mlp, Mlp(m, /*split=*/true));
      return l;
    }
    MX_ASSIGN_OR_RETURN(l.moe.gate, Matrix(m + "gate.weight"));
    MX_ASSIGN_OR_RETURN(l.moe.e_score_correction_bias, Vector(m + "gate.e_score_correction_bias"));
    l.moe.experts.reserve(c.n_routed_experts);
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      if (!shard_.OwnsExpert(e, c.n_routed_experts)) {  // another rank's (ep): left empty
        l.moe.experts.emplace_back();
        continue;
      }
      MX_ASSIGN_OR_RETURN(MlpWeights ew,
                          Mlp(fmt::format("{}experts.{}.", m, e), !shard_.expert_parallel));
      l.moe.experts.push_back(std::move(ew));
    }
    l.moe.has_shared = c.n_shared_experts > 0;
    if (l.moe.has_shared) {
      MX_ASSIGN_OR_RETURN(l.moe.shared_experts, Mlp(m + "shared_experts.", /*split=*/true));
    }
    return l;
  }

 private:
  const Checkpoint& ckpt_;
  const ModelShard& shard_;
  std::unordered_set<const TensorView*> viewed_;  // tensors some weight uses in place
  LoadProgress* progress_;
};

}  // namespace

namespace {

bool EndsWithStr(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Found(const TensorMatch& m) {
  std::string s = fmt::format("{} {}", DTypeName(m.view->dtype), ShapeString(m.view->shape));
  if (m.scale != nullptr) {
    s += fmt::format(" + {} {} {}", m.scale->name, DTypeName(m.scale->dtype),
                     ShapeString(m.scale->shape));
  }
  return s;
}

}  // namespace

Status CheckQuantization(const ModelConfig& config, const CheckpointReport& report) {
  quant::QuantConfigInfo info;
  if (config.quantization_config_json) {
    auto parsed = quant::ParseQuantConfig(*config.quantization_config_json);
    if (!parsed.ok()) return parsed.status();
    info = std::move(parsed).value();
  }
  const bool mxfp4 = info.quant_method == "quark" && info.weight_mxfp4;
  if (info.quant_method == "quark" && !info.weight_mxfp4) {
    return Unimplemented(
        "quantization_config: quant_method quark with a weight spec other than fp4 per_group 32 "
        "(MXFP4) is not supported");
  }
  MX_ASSIGN_OR_RETURN(quant::ExcludeList exclude, quant::ExcludeList::Parse(info.exclude));
  const int64_t mtp_layer = config.num_nextn_predict_layers > 0 ? config.mtp_layer_index() : -1;
  std::vector<std::string> problems;
  const bool fp8 = info.quant_method == "fp8";
  if (fp8 && !info.weight_block_size.empty() &&
      info.weight_block_size != std::vector<int64_t>{128, 128}) {
    problems.push_back(fmt::format(
        "quantization_config.weight_block_size [{}]: only [128, 128] blocks are supported",
        fmt::join(info.weight_block_size, ", ")));
  }
  if (fp8 && info.fp8_fmt != "e4m3") {
    problems.push_back(fmt::format(
        "quantization_config.fmt '{}': only e4m3 (OCP e4m3fn) FP8 weights are supported",
        info.fp8_fmt));
  }
  for (const TensorMatch& m : report.matches) {
    const TensorSpec& spec = *m.spec;
    if (m.view == nullptr || spec.shape.size() != 2 || !EndsWithStr(spec.name, ".weight")) continue;
    const std::string module = spec.name.substr(0, spec.name.size() - 7);
    const int64_t n = spec.shape[0], k = spec.shape[1];
    const std::string want_mx =
        fmt::format("U8 [{}, {}] + {}.weight_scale U8 [{}, {}]", n, k / 2, module, n, k / 32);
    const std::string want_bf16 =
        fmt::format("{} {}", DTypeName(spec.dtype), ShapeString(spec.shape));
    if (m.format == WeightFormat::kFP8) {
      // FP8 weights belong to an fp8 checkpoint, or to an MXFP4 one that kept them out of MXFP4
      // (made from an FP8 checkpoint: a mixed one).
      if (mxfp4 && !exclude.Matches(module, mtp_layer)) {
        problems.push_back(fmt::format(
            "{}: not covered by quantization_config.exclude, so expected MXFP4 {}, found {}",
            spec.name, want_mx, Found(m)));
      } else if (!mxfp4 && !fp8) {
        problems.push_back(
            fmt::format("{}: config.json has no fp8 quantization_config (quant_method fp8, "
                        "weight_block_size [128, 128]), so expected {}, found {}",
                        spec.name, want_bf16, Found(m)));
      }
      continue;
    }
    if (m.format == WeightFormat::kMXFP4) {
      if (!mxfp4) {
        problems.push_back(
            fmt::format("{}: config.json has no MXFP4 (quark fp4) quantization_config, so expected "
                        "{}, found {}",
                        spec.name, want_bf16, Found(m)));
      } else if (const quant::ExcludeRule* r = exclude.FirstMatch(module, mtp_layer)) {
        problems.push_back(fmt::format(
            "{}: quantization_config.exclude entry '{}' keeps it unquantized, so expected {}, "
            "found {}",
            spec.name, r->text(), want_bf16, Found(m)));
      }
      continue;
    }
    const bool float_weight = m.format == WeightFormat::kBF16 || m.format == WeightFormat::kF16 ||
                              m.format == WeightFormat::kF32;
    // The embedding and the MoE router are not Linear modules: Quark never quantizes them.
    const bool quantizable =
        spec.category != TensorCategory::kEmbed && !EndsWithStr(spec.name, ".mlp.gate.weight");
    if (mxfp4 && float_weight && quantizable && !exclude.Matches(module, mtp_layer)) {
      problems.push_back(fmt::format(
          "{}: not covered by quantization_config.exclude (checked as {}), so expected MXFP4 {}, "
          "found {}",
          spec.name, fmt::join(quant::ModuleAliases(module, mtp_layer), ", "), want_mx, Found(m)));
    }
  }
  if (problems.empty()) return Status::Ok();
  std::string msg = fmt::format("{} tensor(s) disagree with quantization_config:", problems.size());
  for (size_t i = 0; i < problems.size() && i < 20; ++i) msg += "\n  " + problems[i];
  if (problems.size() > 20) msg += fmt::format("\n  ... and {} more", problems.size() - 20);
  return InvalidArgument("{}", msg);
}

std::string ModelShard::Describe() const {
  if (whole()) return "whole model";
  return fmt::format("rank {} of {} ({})", rank, size,
                     expert_parallel ? "expert parallel" : "tensor parallel");
}

Status CheckShardable(const ModelConfig& c, const ModelShard& s) {
  if (s.size < 1 || s.rank < 0 || s.rank >= s.size) {
    return InvalidArgument("rank {} of a group of {}", s.rank, s.size);
  }
  if (s.whole()) return Status::Ok();
  const char* flag = s.expert_parallel ? "--ep" : "--tp";
  auto need = [&](const char* field, int64_t v) -> Status {
    if (v % s.size == 0) return Status::Ok();
    return InvalidArgument("{} {}: {} = {} is not divisible by {}", flag, s.size, field, v, s.size);
  };
  MX_RETURN_IF_ERROR(need("num_attention_heads", c.num_attention_heads));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_moe_layer(l)) {
      MX_RETURN_IF_ERROR(need("intermediate_size", c.intermediate_size));
      break;
    }
  }
  if (c.vocab_size < s.size) {
    return InvalidArgument("{} {}: vocab_size {} is smaller than the group", flag, s.size,
                           c.vocab_size);
  }
  if (c.n_routed_experts > 0) {
    if (s.expert_parallel) {
      MX_RETURN_IF_ERROR(need("n_routed_experts", c.n_routed_experts));
    } else {
      MX_RETURN_IF_ERROR(need("moe_intermediate_size", c.moe_intermediate_size));
    }
    if (c.n_shared_experts > 0) {
      MX_RETURN_IF_ERROR(need("moe_intermediate_size (shared experts)",
                              c.moe_intermediate_size * c.n_shared_experts));
    }
  }
  return Status::Ok();
}

Result<CheckpointReport> CheckLoadable(const ModelConfig& config,
                                       const std::vector<TensorSpec>& specs, const Checkpoint& ckpt,
                                       const ModelShard& shard) {
  MX_RETURN_IF_ERROR(CheckShardable(config, shard));
  CheckpointReport report = CheckCheckpoint(config, specs, ckpt);
  // One error for every problem: the tensors' own (missing, mis-shaped, a malformed FP8 scale)
  // and their disagreements with quantization_config.
  const Status quant = CheckQuantization(config, report);
  if (!report.ok()) {
    return InvalidArgument("checkpoint does not match its config: {}{}", report.ProblemSummary(),
                           quant.ok() ? "" : quant.message());
  }
  MX_RETURN_IF_ERROR(quant);
  return report;
}

Result<ModelWeights> LoadModelWeights(const ModelConfig& config, const Checkpoint& ckpt,
                                      const ModelShard& shard, LoadProgress* progress) {
  const std::vector<TensorSpec> specs = ExpectedTensors(config);
  MX_RETURN_IF_ERROR(CheckLoadable(config, specs, ckpt, shard).status());
  Loader ld(ckpt, shard, progress);
  ModelWeights w;
  w.shard = shard;
  MX_ASSIGN_OR_RETURN(w.embed_tokens, ld.Matrix("model.embed_tokens.weight"));
  MX_ASSIGN_OR_RETURN(w.norm, ld.Vector("model.norm.weight"));
  const int64_t V = config.vocab_size, vb = shard.VocabBlock(V),
                v0 = std::min<int64_t>(V, shard.rank * vb);
  MX_ASSIGN_OR_RETURN(w.lm_head,
                      ld.ColumnParallel("lm_head.weight", v0, std::min<int64_t>(V, v0 + vb) - v0));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    MX_ASSIGN_OR_RETURN(LayerWeights l, ld.Layer(config, i));
    w.layers.push_back(std::move(l));
  }
  w.has_mtp = config.num_nextn_predict_layers > 0;
  if (w.has_mtp) {
    const int64_t L = config.mtp_layer_index();
    const std::string p = fmt::format("model.layers.{}.", L);
    MX_ASSIGN_OR_RETURN(w.mtp.enorm, ld.Vector(p + "enorm.weight"));
    MX_ASSIGN_OR_RETURN(w.mtp.hnorm, ld.Vector(p + "hnorm.weight"));
    MX_ASSIGN_OR_RETURN(w.mtp.eh_proj, ld.Matrix(p + "eh_proj.weight"));
    MX_ASSIGN_OR_RETURN(w.mtp.shared_head_norm, ld.Vector(p + "shared_head.norm.weight"));
    MX_ASSIGN_OR_RETURN(w.mtp.layer, ld.Layer(config, L));
  }
  ld.DropCopied();
  return w;
}

}  // namespace mx
