// Tuned MoE config files: names, parsing with file + field errors, lookup (see moe_tuning.h).
#include "tune/moe_tuning.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/strings.h"

namespace mx {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "mxserve-moe-tune";
constexpr int64_t kVersion = 1;

constexpr MoeSplit kSplits[] = {MoeSplit::kColumns, MoeSplit::kBatched, MoeSplit::kExperts};

// Field access that names `path: field` in every error.
class Fields {
 public:
  Fields(const std::string& path, const json& j, std::string prefix)
      : path_(path), j_(j), prefix_(std::move(prefix)) {}

  Status Error(const std::string& field, const std::string& what) const {
    return InvalidArgument("{}: {}{}: {}", path_, prefix_, field, what);
  }
  Result<const json*> Get(const std::string& field) const {
    if (!j_.is_object()) return InvalidArgument("{}: {}: expected an object", path_, Where());
    auto it = j_.find(field);
    if (it == j_.end()) return Error(field, "missing");
    return &*it;
  }
  Result<int64_t> Int(const std::string& field, int64_t lo, int64_t hi) const {
    MX_ASSIGN_OR_RETURN(const json* v, Get(field));
    if (!v->is_number_integer())
      return Error(field, fmt::format("expected an integer, got {}", v->dump()));
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) return Error(field, fmt::format("{} is outside [{}, {}]", x, lo, hi));
    return x;
  }
  Result<double> Number(const std::string& field) const {
    MX_ASSIGN_OR_RETURN(const json* v, Get(field));
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0) {
      return Error(field, fmt::format("expected a non-negative number, got {}", v->dump()));
    }
    return v->get<double>();
  }
  Result<std::string> String(const std::string& field) const {
    MX_ASSIGN_OR_RETURN(const json* v, Get(field));
    if (!v->is_string()) return Error(field, fmt::format("expected a string, got {}", v->dump()));
    return v->get<std::string>();
  }
  Result<bool> Bool(const std::string& field) const {
    MX_ASSIGN_OR_RETURN(const json* v, Get(field));
    if (!v->is_boolean())
      return Error(field, fmt::format("expected true/false, got {}", v->dump()));
    return v->get<bool>();
  }

 private:
  std::string Where() const {
    return prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1);
  }
  const std::string& path_;
  const json& j_;
  std::string prefix_;  // "buckets[2].best." or ""
};

Result<MoeKernelConfig> ParseConfig(const Fields& f) {
  MoeKernelConfig c;
  MX_ASSIGN_OR_RETURN(std::string split, f.String("split"));
  bool found = false;
  for (MoeSplit s : kSplits) {
    if (split == MoeSplitName(s)) {
      c.split = s;
      found = true;
    }
  }
  if (!found)
    return f.Error("split", fmt::format("'{}' is not columns, batched or experts", split));
  MX_ASSIGN_OR_RETURN(c.fuse_gate_up, f.Bool("fuse_gate_up"));
  MX_ASSIGN_OR_RETURN(int64_t mr, f.Int("mr", 0, 4));
  if (!ValidRowTile(static_cast<int>(mr)))
    return f.Error("mr", fmt::format("{} is not 0, 1, 2 or 4", mr));
  c.tiling.mr = static_cast<int>(mr);
  MX_ASSIGN_OR_RETURN(int64_t nb, f.Int("nb", 0, 1 << 20));
  c.tiling.nb = static_cast<int>(nb);
  MX_ASSIGN_OR_RETURN(c.token_tile, f.Int("token_tile", 0, 1 << 20));
  return c;
}

nlohmann::ordered_json ConfigJson(const MoeKernelConfig& c) {
  return {{"split", MoeSplitName(c.split)},
          {"fuse_gate_up", c.fuse_gate_up},
          {"mr", c.tiling.mr},
          {"nb", c.tiling.nb},
          {"token_tile", c.token_tile}};
}

}  // namespace

std::string MoeShapeName(const MoeShape& s) {
  return fmt::format("d{}-f{}-e{}-k{}-s{}", s.model_dim, s.moe_inter, s.n_experts, s.topk,
                     s.n_shared);
}

std::string MoeShapeSpec(const MoeShape& s) {
  return fmt::format("model_dim={},moe_inter={},E={},topk={},shared={}", s.model_dim, s.moe_inter,
                     s.n_experts, s.topk, s.n_shared);
}

Result<MoeShape> ParseMoeShape(std::string_view spec) {
  MoeShape s;
  s.n_shared = 1;
  bool seen[4] = {false, false, false, false};
  std::string text(spec);
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("--shape '{}': '{}' is not key=value", spec, Trim(item));
    }
    const std::string key(Trim(std::string_view(item).substr(0, eq)));
    const std::string val(Trim(std::string_view(item).substr(eq + 1)));
    int64_t v = 0;
    size_t used = 0;
    try {
      v = std::stoll(val, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != val.size() || v < 0) {
      return InvalidArgument("--shape '{}': {}={} is not a non-negative integer", spec, key, val);
    }
    if (key == "model_dim" || key == "hidden_size") {
      s.model_dim = v, seen[0] = true;
    } else if (key == "moe_inter" || key == "moe_intermediate_size") {
      s.moe_inter = v, seen[1] = true;
    } else if (key == "E" || key == "n_routed_experts") {
      s.n_experts = v, seen[2] = true;
    } else if (key == "topk" || key == "num_experts_per_tok") {
      s.topk = v, seen[3] = true;
    } else if (key == "shared" || key == "n_shared_experts") {
      s.n_shared = v;
    } else {
      return InvalidArgument(
          "--shape '{}': unknown key '{}' (model_dim, moe_inter, E, topk, shared)", spec, key);
    }
  }
  const char* names[4] = {"model_dim", "moe_inter", "E", "topk"};
  for (int i = 0; i < 4; ++i) {
    if (!seen[i]) return InvalidArgument("--shape '{}': {} is missing", spec, names[i]);
  }
  if (s.model_dim == 0 || s.moe_inter == 0 || s.n_experts == 0 || s.topk == 0) {
    return InvalidArgument("--shape '{}': model_dim, moe_inter, E and topk must be > 0", spec);
  }
  if (s.topk > s.n_experts) {
    return InvalidArgument("--shape '{}': topk {} exceeds E {}", spec, s.topk, s.n_experts);
  }
  return s;
}

std::string MoeTuneFileName(const std::string& dtype, const MoeShape& s, const std::string& isa) {
  return fmt::format("{}-{}-{}.json", dtype, MoeShapeName(s), isa);
}

const MoeKernelConfig& MoeTuneTable::For(int64_t rows) const {
  const double lr = std::log(static_cast<double>(std::max<int64_t>(rows, 1)));
  const MoeTuneBucket* best = &buckets.front();
  double best_d = std::abs(std::log(static_cast<double>(best->tokens)) - lr);
  for (const MoeTuneBucket& b : buckets) {
    const double d = std::abs(std::log(static_cast<double>(b.tokens)) - lr);
    if (d < best_d - 1e-12) best = &b, best_d = d;
  }
  return best->best;
}

MoeKernelConfig MoeTuning::For(const ForwardBatch& b) const {
  int64_t rows = 0;
  for (const SequenceInput& q : b.seqs) rows += static_cast<int64_t>(q.tokens.size());
  return For(rows);
}

MoeKernelConfig MoeTuning::For(const MtpBatch& b) const {
  int64_t rows = 0;
  for (const MtpSequenceInput& q : b.seqs) rows += static_cast<int64_t>(q.tokens.size());
  return For(rows);
}

Result<MoeTuneTable> ParseMoeTuneTable(std::string_view text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument("{}: not valid JSON: {}", path, e.what());
  }
  const Fields top(path, j, "");
  MoeTuneTable t;
  MX_ASSIGN_OR_RETURN(std::string format, top.String("format"));
  if (format != kFormat)
    return top.Error("format", fmt::format("'{}', expected '{}'", format, kFormat));
  MX_ASSIGN_OR_RETURN(int64_t version, top.Int("version", 0, 1 << 30));
  if (version != kVersion) {
    return top.Error("version",
                     fmt::format("{} is not supported (this build reads {})", version, kVersion));
  }
  MX_ASSIGN_OR_RETURN(t.dtype, top.String("dtype"));
  if (t.dtype != "bf16" && t.dtype != "mxfp4" && t.dtype != "fp8" && t.dtype != "f32") {
    return top.Error("dtype", fmt::format("'{}' is not bf16, mxfp4, fp8 or f32", t.dtype));
  }
  MX_ASSIGN_OR_RETURN(t.isa, top.String("isa"));
  if (t.isa != "ref" && t.isa != "avx2" && t.isa != "avx512") {
    return top.Error("isa", fmt::format("'{}' is not ref, avx2 or avx512", t.isa));
  }
  MX_ASSIGN_OR_RETURN(const json* shape, top.Get("shape"));
  const Fields sf(path, *shape, "shape.");
  MX_ASSIGN_OR_RETURN(t.shape.model_dim, sf.Int("model_dim", 1, 1 << 24));
  MX_ASSIGN_OR_RETURN(t.shape.moe_inter, sf.Int("moe_inter", 1, 1 << 24));
  MX_ASSIGN_OR_RETURN(t.shape.n_experts, sf.Int("E", 1, 1 << 20));
  MX_ASSIGN_OR_RETURN(t.shape.topk, sf.Int("topk", 1, t.shape.n_experts));
  MX_ASSIGN_OR_RETURN(t.shape.n_shared, sf.Int("shared", 0, 1 << 10));
  MX_ASSIGN_OR_RETURN(t.threads, top.Int("threads", 1, 1 << 16));
  MX_ASSIGN_OR_RETURN(t.experts_allocated, top.Int("experts_allocated", 1, t.shape.n_experts));
  MX_ASSIGN_OR_RETURN(t.command, top.String("command"));
  MX_ASSIGN_OR_RETURN(const json* buckets, top.Get("buckets"));
  if (!buckets->is_array() || buckets->empty()) {
    return top.Error("buckets", "expected a non-empty array");
  }
  for (size_t i = 0; i < buckets->size(); ++i) {
    const Fields bf(path, (*buckets)[i], fmt::format("buckets[{}].", i));
    MoeTuneBucket b;
    MX_ASSIGN_OR_RETURN(b.tokens, bf.Int("tokens", 1, 1 << 24));
    if (!t.buckets.empty() && b.tokens <= t.buckets.back().tokens) {
      return bf.Error("tokens", fmt::format("{} does not ascend (previous bucket {})", b.tokens,
                                            t.buckets.back().tokens));
    }
    MX_ASSIGN_OR_RETURN(const json* best, bf.Get("best"));
    MX_ASSIGN_OR_RETURN(b.best,
                        ParseConfig(Fields(path, *best, fmt::format("buckets[{}].best.", i))));
    MX_ASSIGN_OR_RETURN(b.best_us, bf.Number("best_us"));
    MX_ASSIGN_OR_RETURN(b.default_us, bf.Number("default_us"));
    MX_ASSIGN_OR_RETURN(b.candidates, bf.Int("candidates", 1, 1 << 20));
    t.buckets.push_back(b);
  }
  return t;
}

Result<MoeTuneTable> LoadMoeTuneTable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMoeTuneTable(ss.str(), path);
}

std::string SerializeMoeTuneTable(const MoeTuneTable& t) {
  using ojson = nlohmann::ordered_json;
  ojson buckets = ojson::array();
  for (const MoeTuneBucket& b : t.buckets) {
    buckets.push_back(
        {{"tokens", b.tokens},
         {"best", ConfigJson(b.best)},
         {"best_us", std::round(b.best_us * 10) / 10},
         {"default_us", std::round(b.default_us * 10) / 10},
         {"speedup", b.best_us > 0 ? std::round(b.default_us / b.best_us * 1000) / 1000 : 0},
         {"candidates", b.candidates}});
  }
  ojson j = {{"format", kFormat},
             {"version", kVersion},
             {"dtype", t.dtype},
             {"isa", t.isa},
             {"shape",
              {{"model_dim", t.shape.model_dim},
               {"moe_inter", t.shape.moe_inter},
               {"E", t.shape.n_experts},
               {"topk", t.shape.topk},
               {"shared", t.shape.n_shared}}},
             {"threads", t.threads},
             {"experts_allocated", t.experts_allocated},
             {"command", t.command},
             {"buckets", std::move(buckets)}};
  return j.dump(2) + "\n";
}

std::string MoeTuneCommand(const MoeShape& shape, const std::string& dtype,
                           const std::string& output_dir) {
  std::string cmd =
      fmt::format("mxserve tune moe --shape {} --dtype {} --tokens 1,2,4,8,16,32,64,128,256,512",
                  MoeShapeSpec(shape), dtype);
  if (!output_dir.empty()) cmd += " --output-dir " + output_dir;
  return cmd;
}

Result<MoeTuning> ResolveMoeTuning(const MoeShape& shape, const std::string& dtype,
                                   const std::string& isa, const std::string& user_dir,
                                   bool has_moe) {
  MoeTuning r;
  r.has_moe = has_moe;
  r.dtype = dtype;
  r.isa = isa;
  r.shape = shape;
  r.file = MoeTuneFileName(dtype, shape, isa);
  r.searched = kShippedMoeConfigs;
  if (!user_dir.empty()) r.searched += " or " + user_dir;
  if (!has_moe) return r;
  auto use = [&](MoeTuneTable t, const std::string& path) -> Result<MoeTuning> {
    if (!(t.shape == shape)) {
      return InvalidArgument("{}: shape: {} does not match the model's {}", path,
                             MoeShapeSpec(t.shape), MoeShapeSpec(shape));
    }
    if (t.dtype != dtype) {
      return InvalidArgument("{}: dtype: '{}' does not match the model's '{}'", path, t.dtype,
                             dtype);
    }
    if (t.isa != isa) {
      return InvalidArgument("{}: isa: '{}' does not match the kernels' '{}'", path, t.isa, isa);
    }
    r.tuned = true;
    r.file = path;
    r.table = std::move(t);
    return r;
  };
  for (const ShippedMoeConfig& f : ShippedMoeConfigs()) {
    if (f.name != r.file) continue;
    const std::string path = fmt::format("{}/{}", kShippedMoeConfigs, f.name);
    MX_ASSIGN_OR_RETURN(MoeTuneTable t, ParseMoeTuneTable(f.text, path));
    return use(std::move(t), path);
  }
  if (!user_dir.empty()) {
    const std::string path = (std::filesystem::path(user_dir) / r.file).string();
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      MX_ASSIGN_OR_RETURN(MoeTuneTable t, LoadMoeTuneTable(path));
      return use(std::move(t), path);
    }
  }
  r.command = MoeTuneCommand(shape, dtype, user_dir);
  return r;
}

void LogMoeTuning(const MoeTuning& m) {
  if (!m.has_moe) return;
  if (m.tuned) {
    MX_LOG_INFO("MoE kernels: tuned config {} ({} buckets, {}..{} tokens, tuned on {} threads)",
                m.file, m.table.buckets.size(), m.table.buckets.front().tokens,
                m.table.buckets.back().tokens, m.table.threads);
    return;
  }
  MX_LOG_WARN(
      "MoE kernels: no tuned config for {} {} on {} ({} not in {}); running the untuned "
      "default ({}). Tune it with: {}",
      m.dtype, MoeShapeSpec(m.shape), m.isa, m.file, m.searched,
      MoeConfigString(DefaultMoeConfig()), m.command);
}

}  // namespace mx
