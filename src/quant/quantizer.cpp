// Checkpoint quantizer (see quantizer.h).
#include "quant/quantizer.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/regex.h"
#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "quant/exclude.h"
#include "quant/quant_format.h"
#include "quant/quark_config.h"

namespace mx::quant {

namespace fs = std::filesystem;

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
  bool quantize;
};

// Quantizes one [n, k] tensor to `f`: codes [n, k/block · code_bytes] and scales [n, k/block],
// rows split over the pool. Errors name the tensor and the row of the first bad value.
Status QuantizeTensor(const QuantFormat& f, const TensorView& v, ScaleMode mode, ThreadPool& pool,
                      std::vector<uint8_t>* packed, std::vector<uint8_t>* scales) {
  const int64_t n = v.shape[0], k = v.shape[1], blocks = k / f.block;
  packed->assign(n * blocks * f.code_bytes, 0);
  scales->assign(n * blocks, 0);
  std::mutex mu;
  Status first;
  int64_t first_row = -1;
  pool.parallel_for(0, n, [&](int64_t lo, int64_t hi, int) {
    std::vector<float> row(k);
    std::vector<uint16_t> row16(k);
    for (int64_t r = lo; r < hi; ++r) {
      Status st;
      uint8_t* p = packed->data() + r * blocks * f.code_bytes;
      uint8_t* s = scales->data() + r * blocks;
      if (v.dtype == DType::kBF16) {
        std::memcpy(row16.data(), v.data + r * k * 2, k * 2);
        st = f.encode_bf16(row16.data(), k, mode, p, s);
      } else {
        std::memcpy(row.data(), v.data + r * k * 4, k * 4);
        st = f.encode_f32(row.data(), k, mode, p, s);
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_row < 0 || r < first_row) {
          first_row = r;
          first = st;
        }
        return;
      }
    }
  });
  if (first_row >= 0) {
    return InvalidArgument("{}: cannot quantize: row {}: {}", v.name, first_row, first.message());
  }
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
  std::string config_text;
  MX_RETURN_IF_ERROR(ReadFile(in / "config.json", &config_text));
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(config_text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("{}: not JSON: {}", (in / "config.json").string(), e.what());
  }
  if (!config.is_object()) return InvalidArgument("{}/config.json: not an object", in_dir);
  if (config.contains("quantization_config")) {
    return InvalidArgument("{}/config.json: the checkpoint is already quantized", in_dir);
  }
  const int64_t mtp_layer = config.value("num_nextn_predict_layers", 0) > 0
                                ? config.value("num_hidden_layers", int64_t{-1})
                                : -1;
  MX_ASSIGN_OR_RETURN(const QuantFormat* format, FindQuantFormat(opts.format));
  const QuantFormat& qf = *format;
  MX_ASSIGN_OR_RETURN(ExcludeList exclude, ExcludeList::Parse(opts.exclude));
  MX_ASSIGN_OR_RETURN(ExcludeList include, ExcludeList::Parse(opts.include));
  MX_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(in_dir));

  // Decide every tensor first, so that a bad tensor fails before anything is written.
  std::vector<Plan> plan;
  QuantizeSummary sum;
  std::vector<std::string> problems;
  for (const TensorView* v : ckpt.tensors()) {
    const bool linear = v->shape.size() == 2 && EndsWith(v->name, ".weight");
    bool q = false;
    if (linear) {
      const std::string mod = ModuleName(v->name);
      q = (IsRoutedExpertWeight(v->name) || include.Matches(mod, mtp_layer)) &&
          !exclude.Matches(mod, mtp_layer);
      if (q && v->dtype != DType::kBF16 && v->dtype != DType::kF32) {
        problems.push_back(fmt::format("{}: dtype {} cannot be quantized (want BF16 or F32)",
                                       v->name, DTypeName(v->dtype)));
      } else if (q && v->shape[1] % qf.block != 0) {
        problems.push_back(fmt::format("{}: in-dimension {} of [{}, {}] is not divisible by {}",
                                       v->name, v->shape[1], v->shape[0], v->shape[1], qf.block));
      }
      if (!q) sum.exclude.push_back(ModuleName(v->name));
    }
    plan.push_back({v, q});
    q ? ++sum.n_quantized : ++sum.n_kept;
    sum.in_bytes += v->nbytes;
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("{}: {} tensor(s) cannot be quantized to {}:", in_dir,
                                  problems.size(), qf.name);
    for (size_t i = 0; i < problems.size() && i < 20; ++i) msg += "\n  " + problems[i];
    return InvalidArgument("{}", msg);
  }

  const fs::path tmp = out.parent_path() / fmt::format(".{}.tmp-{}", out.filename().string(),
                                                       static_cast<long>(::getpid()));
  fs::remove_all(tmp, ec);
  TempDirGuard guard(tmp);
  if (!fs::create_directories(tmp, ec)) {
    return IoError("{}: cannot create: {}", tmp.string(), ec.message());
  }

  ThreadPool pool(opts.threads);
  SafetensorsWriter writer;
  QuantizeProgress progress;
  progress.tensors_total = static_cast<int64_t>(plan.size());
  progress.bytes_total = sum.in_bytes;
  std::map<std::string, std::vector<uint8_t>> pending_scales;  // produced with the data
  auto tick = [&](const TensorView& v) {
    ++progress.tensors_done;
    progress.bytes_done += v.nbytes;
    progress.current = v.name;
    if (opts.progress) opts.progress(progress);
  };
  for (const Plan& p : plan) {
    const TensorView& v = *p.view;
    if (!p.quantize) {
      MX_RETURN_IF_ERROR(writer.AddLazy(v.name, v.dtype, v.shape, [&v, &tick](ByteSink& s) {
        MX_RETURN_IF_ERROR(s.Write(v.data, v.nbytes));
        tick(v);
        return Status::Ok();
      }));
      continue;
    }
    const int64_t n = v.shape[0], blocks = v.shape[1] / qf.block;
    const ScaleMode mode = opts.scale_mode;
    MX_RETURN_IF_ERROR(writer.AddLazy(v.name, DType::kU8, {n, blocks * qf.code_bytes},
                                      [&qf, &v, mode, &pool, &pending_scales, &tick](ByteSink& s) {
                                        std::vector<uint8_t> packed, scales;
                                        MX_RETURN_IF_ERROR(
                                            QuantizeTensor(qf, v, mode, pool, &packed, &scales));
                                        MX_RETURN_IF_ERROR(s.Write(packed.data(), packed.size()));
                                        pending_scales[v.name] = std::move(scales);
                                        tick(v);
                                        return Status::Ok();
                                      }));
    const std::string scale_name = v.name + qf.scale_suffix;  // v.name ends in ".weight"
    if (ckpt.Find(scale_name) != nullptr) {
      return InvalidArgument("{}: already has a tensor {}", in_dir, scale_name);
    }
    MX_RETURN_IF_ERROR(writer.AddLazy(
        scale_name, DType::kU8, {n, blocks}, [&qf, &v, mode, &pool, &pending_scales](ByteSink& s) {
          auto it = pending_scales.find(v.name);
          std::vector<uint8_t> scales;
          if (it != pending_scales.end()) {
            scales = std::move(it->second);
            pending_scales.erase(it);
          } else {  // written before its data (not in name order): quantize again
            std::vector<uint8_t> packed;
            MX_RETURN_IF_ERROR(QuantizeTensor(qf, v, mode, pool, &packed, &scales));
          }
          return s.Write(scales.data(), scales.size());
        }));
  }
  sum.out_bytes = writer.total_bytes();
  MX_RETURN_IF_ERROR(writer.Write(tmp.string(), opts.max_shard_bytes));
  sum.num_shards = static_cast<int>(writer.PlanShards(opts.max_shard_bytes).size());

  // note: the one format there is, MXFP4, is described the way Quark does; another format
  // brings its own quantization_config with its table entry.
  config["quantization_config"] = MakeQuarkConfig(opts.scale_mode, sum.exclude);
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
    if (ec) return IoError("{}: cannot remove the old output: {}", out_dir, ec.message());
  }
  fs::rename(tmp, out, ec);
  if (ec) return IoError("{}: cannot move the output into place: {}", out_dir, ec.message());
  guard.Release();
  return sum;
}

}  // namespace mx::quant
