// Checkpoint quantizer (see quantizer.h).
#include "quant/quantizer.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/mmap.h"
#include "base/numerics.h"
#include "base/regex.h"
#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "quant/exclude.h"
#include "quant/fp8.h"
#include "quant/quant_format.h"
#include "quant/quark_config.h"

namespace mx::quant {

namespace fs = std::filesystem;

bool IsFp8DefaultWeight(const std::string& name) {
  // What DeepSeek-V3 / GLM-5-FP8 leave unquantized (glm-moe-dsa.md §2.1): the embedding and
  // lm_head, the MoE router, the indexer's head weights and the MTP layer's projection; 1-d
  // norms and biases are not `.weight` matrices.
  static const Regex kKept =
      Regex::Compile(
          R"(model\.embed_tokens\.weight|lm_head\.weight|.*\.mlp\.gate\.weight|)"
          R"(.*\.indexer\.weights_proj\.weight|.*\.eh_proj\.weight|.*\.shared_head\.head\.weight)")
          .value();
  return !kKept.FullMatch(name);
}

bool IsRoutedExpertWeight(const std::string& name) {
  static const Regex kExpert =
      Regex::Compile(
          R"(model\.layers\.\d+\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight)")
          .value();
  return kExpert.FullMatch(name);
}

Result<uint64_t> ParseByteSize(const std::string& text) {
  static const Regex kSize =
      Regex::Compile(R"((?i)\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*([KMGT]?)(i?)B?\s*)").value();
  std::vector<std::string_view> m;
  if (!kSize.FullMatch(text, &m)) {
    return InvalidArgument("'{}' is not a size (e.g. 5GB, 500MB, 2GiB)", text);
  }
  const double v = std::stod(std::string(m[0]));
  const char unit = m[1].empty() ? ' ' : static_cast<char>(std::toupper(m[1][0]));
  const double base = m[2].empty() ? 1000.0 : 1024.0;
  int p = unit == 'K' ? 1 : unit == 'M' ? 2 : unit == 'G' ? 3 : unit == 'T' ? 4 : 0;
  const double bytes = v * std::pow(base, p);
  if (bytes < 1) return InvalidArgument("size '{}' must be at least one byte", text);
  if (!(bytes < 0x1p64)) return InvalidArgument("size '{}' is beyond 2^64 bytes", text);
  return static_cast<uint64_t>(bytes);
}

namespace {

std::string ModuleName(const std::string& tensor) {
  return tensor.substr(0, tensor.size() - std::string(".weight").size());
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Files beside the weights that a serving engine reads: tokenizer and generation settings.
bool IsCopiedFile(const std::string& name) {
  return name.rfind("tokenizer", 0) == 0 || name == "generation_config.json" ||
         name == "special_tokens_map.json" || name == "added_tokens.json" ||
         name.rfind("chat_template", 0) == 0 || name == "vocab.json" || name == "merges.txt";
}

Status ReadFile(const fs::path& p, std::string* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return NotFound("{}: cannot open", p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

Status WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) return IoError("{}: write failed", p.string());
  return Status::Ok();
}

// Removes a temporary output directory unless released.
class TempDirGuard {
 public:
  explicit TempDirGuard(fs::path p) : p_(std::move(p)) {}
  ~TempDirGuard() {
    if (!p_.empty()) {
      std::error_code ec;
      fs::remove_all(p_, ec);
    }
  }
  void Release() { p_.clear(); }

 private:
  fs::path p_;
};

struct Plan {
  const TensorView* view;
  const TensorView* fp8_scale;  // an FP8 input weight's weight_scale_inv, else null
  bool quantize;
};

// Rows [r0, r0 + rows) of a BF16 / F32 tensor, or of an FP8 one dequantized by its block scales
// (fp32(value · scale), as the FP8 kernels and PyTorch's weight.float() * scale do), as fp32.
void ReadRows(const TensorView& v, const TensorView* fp8_scale, int64_t r0, int64_t rows,
              float* out) {
  const int64_t k = v.shape[1];
  if (v.dtype == DType::kBF16) {
    for (int64_t i = 0; i < rows * k; ++i) {
      uint16_t h;
      std::memcpy(&h, v.data + (r0 * k + i) * 2, 2);
      out[i] = Bf16ToF32(h);
    }
  } else if (v.dtype == DType::kF32) {
    std::memcpy(out, v.data + r0 * k * 4, rows * k * 4);
  } else {  // F8_E4M3: one decode per 128-row block row
    const int64_t kb = (k + kFp8BlockSize - 1) / kFp8BlockSize;
    for (int64_t r = r0; r < r0 + rows;) {
      const int64_t end = std::min(r0 + rows, (r / kFp8BlockSize + 1) * kFp8BlockSize);
      Fp8DecodePanel(v.data + r * k, fp8_scale->data + r / kFp8BlockSize * kb * 4, end - r, k,
                     out + (r - r0) * k);
      r = end;
    }
  }
}

// Quantizes one [n, k] tensor to `f`: codes [n, k / block · code_bytes] and scales
// [ceil(n / block_rows), ceil(k / block)], split over the pool by panels of block_rows rows.
// Errors name the tensor and the row and column of the first bad value.
Status QuantizeTensor(const QuantFormat& f, const Plan& p, ScaleMode mode, ThreadPool& pool,
                      std::vector<uint8_t>* packed, std::vector<uint8_t>* scales) {
  const TensorView& v = *p.view;
  const int64_t n = v.shape[0], k = v.shape[1], row_bytes = k * f.code_bytes / f.block;
  const int64_t panel_scale_bytes = (k + f.block - 1) / f.block * DTypeSize(f.scale_dtype);
  const int64_t panels = (n + f.block_rows - 1) / f.block_rows;
  packed->assign(n * row_bytes, 0);
  scales->assign(panels * panel_scale_bytes, 0);
  std::mutex mu;
  Status first;
  int64_t first_panel = -1;
  pool.parallel_for(0, panels, [&](int64_t lo, int64_t hi, int) {
    std::vector<float> x(f.block_rows * k);
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t r0 = q * f.block_rows, rows = std::min(f.block_rows, n - r0);
      ReadRows(v, p.fp8_scale, r0, rows, x.data());
      const Status st = f.encode(x.data(), rows, k, mode, r0, packed->data() + r0 * row_bytes,
                                 scales->data() + q * panel_scale_bytes);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_panel < 0 || q < first_panel) {
          first_panel = q;
          first = st;
        }
        return;
      }
    }
  });
  if (first_panel >= 0) {
    return InvalidArgument("{}: cannot quantize: {}", v.name, first.message());
  }
  return Status::Ok();
}

// quantization_config of an FP8 checkpoint as DeepSeek-V3 and GLM-5-FP8 write it; modules kept
// in bf16 beyond the default (the --exclude list) go to `ignored_layers`, the list vLLM's and
// sglang's fp8 method read.
nlohmann::ordered_json MakeFp8Config(const std::vector<std::string>& ignored) {
  nlohmann::ordered_json j = {{"activation_scheme", "dynamic"},
                              {"fmt", "e4m3"},
                              {"quant_method", "fp8"},
                              {"weight_block_size", {kFp8BlockSize, kFp8BlockSize}}};
  if (!ignored.empty()) j["ignored_layers"] = ignored;
  return j;
}

// The input's config.json, checked against the requested format: an FP8 block-scaled input
// (DeepSeek / GLM-5-FP8) is read through its scales; any other quantized input is refused.
struct InputConfig {
  nlohmann::ordered_json json;
  int64_t mtp_layer = -1;  // the MTP layer's index, or -1 without one
};

Result<InputConfig> ReadInputConfig(const fs::path& in, const QuantFormat& qf) {
  std::string text;
  MX_RETURN_IF_ERROR(ReadFile(in / "config.json", &text));
  InputConfig c;
  try {
    c.json = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("{}: not JSON: {}", (in / "config.json").string(), e.what());
  }
  if (!c.json.is_object()) return InvalidArgument("{}/config.json: not an object", in.string());
  if (c.json.value("num_nextn_predict_layers", 0) > 0) {
    c.mtp_layer = c.json.value("num_hidden_layers", int64_t{-1});
  }
  if (!c.json.contains("quantization_config")) return c;
  const auto& q = c.json["quantization_config"];
  const bool fp8_input = q.is_object() && q.value("quant_method", "") == "fp8";
  if (!fp8_input || &qf == &Fp8Format()) {
    return InvalidArgument(
        "{}/config.json: the checkpoint is already quantized{}", in.string(),
        fp8_input ? " to fp8" : " (only an fp8 checkpoint can be requantized, to mxfp4)");
  }
  if (q.contains("weight_block_size") &&
      q["weight_block_size"] != nlohmann::ordered_json::array({kFp8BlockSize, kFp8BlockSize})) {
    return InvalidArgument(
        "{}/config.json: quantization_config.weight_block_size {} (want [{}, {}])", in.string(),
        q["weight_block_size"].dump(), kFp8BlockSize, kFp8BlockSize);
  }
  return c;
}

// What happens to every tensor, decided before anything is written so that a bad tensor fails
// first, with one error listing all of them. Counts and bytes go to `sum`; modules that FP8
// quantizes by default but the exclude list keeps go to `ignored`.
Result<std::vector<Plan>> PlanTensors(const std::string& in_dir, const Checkpoint& ckpt,
                                      const QuantFormat& qf, const QuantizeOptions& opts,
                                      int64_t mtp_layer, QuantizeSummary* sum,
                                      std::vector<std::string>* ignored) {
  MX_ASSIGN_OR_RETURN(ExcludeList exclude, ExcludeList::Parse(opts.exclude));
  MX_ASSIGN_OR_RETURN(ExcludeList include, ExcludeList::Parse(opts.include));
  const bool to_fp8 = &qf == &Fp8Format();
  std::vector<Plan> plan;
  std::vector<std::string> problems;
  std::set<std::string> dropped_scales;  // FP8 inputs' scales of weights requantized
  for (const TensorView* v : ckpt.tensors()) {
    const bool linear = v->shape.size() == 2 && EndsWith(v->name, ".weight");
    const TensorView* fp8_scale =
        linear && v->dtype == DType::kF8_E4M3 ? ckpt.Find(v->name + "_scale_inv") : nullptr;
    bool q = false;
    if (linear) {
      const std::string mod = ModuleName(v->name);
      const bool by_default = to_fp8 ? IsFp8DefaultWeight(v->name) : IsRoutedExpertWeight(v->name);
      q = (by_default || include.Matches(mod, mtp_layer)) && !exclude.Matches(mod, mtp_layer);
      if (to_fp8 && by_default && !q) ignored->push_back(mod);
      const int64_t kb = (v->shape[1] + kFp8BlockSize - 1) / kFp8BlockSize;
      const std::vector<int64_t> want_scale{(v->shape[0] + kFp8BlockSize - 1) / kFp8BlockSize, kb};
      if (q && v->dtype == DType::kF8_E4M3 &&
          (fp8_scale == nullptr || fp8_scale->dtype != DType::kF32 ||
           fp8_scale->shape != want_scale)) {
        problems.push_back(fmt::format("{}: FP8 weight without an F32 {}_scale_inv [{}, {}]",
                                       v->name, v->name, want_scale[0], want_scale[1]));
      } else if (q && v->dtype != DType::kBF16 && v->dtype != DType::kF32 &&
                 v->dtype != DType::kF8_E4M3) {
        problems.push_back(fmt::format("{}: dtype {} cannot be quantized (want BF16, F32 or FP8)",
                                       v->name, DTypeName(v->dtype)));
      } else if (q && !qf.partial_blocks && v->shape[1] % qf.block != 0) {
        problems.push_back(fmt::format("{}: in-dimension {} of [{}, {}] is not divisible by {}",
                                       v->name, v->shape[1], v->shape[0], v->shape[1], qf.block));
      }
      if (q && fp8_scale != nullptr) dropped_scales.insert(fp8_scale->name);
      if (!q) sum->exclude.push_back(mod);
    }
    plan.push_back({v, fp8_scale, q});
    q ? ++sum->n_quantized : ++sum->n_kept;
    sum->in_bytes += v->nbytes;
  }
  std::erase_if(plan, [&](const Plan& p) { return dropped_scales.count(p.view->name) > 0; });
  if (!problems.empty()) {
    std::string msg = fmt::format("{}: {} tensor(s) cannot be quantized to {}:", in_dir,
                                  problems.size(), qf.name);
    for (size_t i = 0; i < problems.size() && i < 20; ++i) msg += "\n  " + problems[i];
    return InvalidArgument("{}", msg);
  }
  return plan;
}

// Streams the planned tensors into `writer`: kept ones as they are, quantized ones as codes
// plus a scale tensor, each produced when the writer reaches it (one tensor in memory at a
// time). The lambdas keep references to this object, which must outlive writer.Write().
class PlannedWriter {
 public:
  PlannedWriter(const QuantFormat& qf, const QuantizeOptions& opts, int64_t total_bytes)
      : qf_(qf), opts_(opts), pool_(opts.threads) {
    progress_.bytes_total = total_bytes;
  }

  Status Add(const std::string& in_dir, const Checkpoint& ckpt, const std::vector<Plan>& plan,
             SafetensorsWriter* writer) {
    progress_.tensors_total = static_cast<int64_t>(plan.size());
    for (const Plan& p : plan) {
      if (!p.quantize) {
        const TensorView& v = *p.view;
        MX_RETURN_IF_ERROR(writer->AddLazy(v.name, v.dtype, v.shape, [this, &v](ByteSink& s) {
          MX_RETURN_IF_ERROR(s.Write(v.data, v.nbytes));
          Tick(v);
          return Status::Ok();
        }));
        continue;
      }
      const std::string scale_name = p.view->name + qf_.scale_suffix;  // name ends in ".weight"
      if (ckpt.Find(scale_name) != nullptr) {
        return InvalidArgument("{}: already has a tensor {}", in_dir, scale_name);
      }
      MX_RETURN_IF_ERROR(AddQuantized(p, scale_name, writer));
    }
    return Status::Ok();
  }

 private:
  Status AddQuantized(const Plan& p, const std::string& scale_name, SafetensorsWriter* writer) {
    const int64_t n = p.view->shape[0], k = p.view->shape[1];
    const std::vector<int64_t> code_shape{n, k * qf_.code_bytes / qf_.block};
    const std::vector<int64_t> scale_shape{(n + qf_.block_rows - 1) / qf_.block_rows,
                                           (k + qf_.block - 1) / qf_.block};
    MX_RETURN_IF_ERROR(
        writer->AddLazy(p.view->name, qf_.code_dtype, code_shape, [this, &p](ByteSink& s) {
          std::vector<uint8_t> packed, scales;
          MX_RETURN_IF_ERROR(Quantize(p, &packed, &scales));
          MX_RETURN_IF_ERROR(s.Write(packed.data(), packed.size()));
          pending_scales_[p.view->name] = std::move(scales);
          Tick(*p.view);
          return Status::Ok();
        }));
    return writer->AddLazy(scale_name, qf_.scale_dtype, scale_shape, [this, &p](ByteSink& s) {
      auto it = pending_scales_.find(p.view->name);
      std::vector<uint8_t> scales;
      if (it != pending_scales_.end()) {
        scales = std::move(it->second);
        pending_scales_.erase(it);
      } else {  // written before its data (not in name order): quantize again
        std::vector<uint8_t> packed;
        MX_RETURN_IF_ERROR(Quantize(p, &packed, &scales));
      }
      return s.Write(scales.data(), scales.size());
    });
  }

  Status Quantize(const Plan& p, std::vector<uint8_t>* packed, std::vector<uint8_t>* scales) {
    return QuantizeTensor(qf_, p, opts_.scale_mode, pool_, packed, scales);
  }

  void Tick(const TensorView& v) {
    // The input tensor is consumed: its mapped pages leave the resident set (a 24 GB input
    // otherwise ends the run with ~20 GB of it resident).
    ReleaseMappedPages(v.data, v.nbytes);
    ++progress_.tensors_done;
    progress_.bytes_done += v.nbytes;
    progress_.current = v.name;
    if (opts_.progress) opts_.progress(progress_);
  }

  const QuantFormat& qf_;
  const QuantizeOptions& opts_;
  ThreadPool pool_;
  QuantizeProgress progress_;
  std::map<std::string, std::vector<uint8_t>> pending_scales_;  // produced with the data
};

// Completes the output in `tmp` (config.json, the tokenizer and generation files copied from
// `in`) and moves it to `out`, replacing an older output.
Status PublishOutput(const fs::path& in, const fs::path& tmp, const fs::path& out,
                     const nlohmann::ordered_json& config) {
  std::error_code ec;
  MX_RETURN_IF_ERROR(WriteFile(tmp / "config.json", config.dump(2) + "\n"));
  for (const auto& entry : fs::directory_iterator(in, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && IsCopiedFile(name)) {
      fs::copy_file(entry.path(), tmp / name, fs::copy_options::overwrite_existing, ec);
      if (ec) return IoError("{}: copy failed: {}", entry.path().string(), ec.message());
    }
  }
  if (fs::exists(out, ec)) {
    fs::remove_all(out, ec);
    if (ec) return IoError("{}: cannot remove the old output: {}", out.string(), ec.message());
  }
  fs::rename(tmp, out, ec);
  if (ec) return IoError("{}: cannot move the output into place: {}", out.string(), ec.message());
  return Status::Ok();
}

}  // namespace

Result<QuantizeSummary> QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                           const QuantizeOptions& opts) {
  const fs::path in(in_dir), out(out_dir);
  std::error_code ec;
  if (fs::exists(out, ec) && !opts.overwrite) {
    return AlreadyExists("{}: output directory exists (use --overwrite to replace it)", out_dir);
  }
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec)) {
    return InvalidArgument("{}: the output directory is the input directory", out_dir);
  }
  MX_ASSIGN_OR_RETURN(const QuantFormat* qf, FindQuantFormat(opts.format));
  MX_ASSIGN_OR_RETURN(InputConfig config, ReadInputConfig(in, *qf));
  MX_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(in_dir));
  QuantizeSummary sum;
  std::vector<std::string> ignored;
  MX_ASSIGN_OR_RETURN(std::vector<Plan> plan,
                      PlanTensors(in_dir, ckpt, *qf, opts, config.mtp_layer, &sum, &ignored));

  const fs::path tmp = out.parent_path() / fmt::format(".{}.tmp-{}", out.filename().string(),
                                                       static_cast<long>(::getpid()));
  fs::remove_all(tmp, ec);
  TempDirGuard guard(tmp);
  if (!fs::create_directories(tmp, ec)) {
    return IoError("{}: cannot create: {}", tmp.string(), ec.message());
  }
  SafetensorsWriter writer;
  PlannedWriter planned(*qf, opts, sum.in_bytes);
  MX_RETURN_IF_ERROR(planned.Add(in_dir, ckpt, plan, &writer));
  sum.out_bytes = writer.total_bytes();
  MX_RETURN_IF_ERROR(writer.Write(tmp.string(), opts.max_shard_bytes));
  sum.num_shards = static_cast<int>(writer.PlanShards(opts.max_shard_bytes).size());

  config.json["quantization_config"] =
      qf == &Fp8Format() ? MakeFp8Config(ignored) : MakeQuarkConfig(opts.scale_mode, sum.exclude);
  MX_RETURN_IF_ERROR(PublishOutput(in, tmp, out, config.json));
  guard.Release();
  return sum;
}

}  // namespace mx::quant
