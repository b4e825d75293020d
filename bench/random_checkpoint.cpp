// See random_checkpoint.h.
#include "random_checkpoint.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "base/numerics.h"
#include "io/model_config.h"
#include "io/safetensors_writer.h"
#include "model/tensor_plan.h"

namespace mx::bench {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return IoError("cannot write {}", path);
  return Status::Ok();
}

// Elements per chunk: each chunk's values come from its own generator, so chunks are generated
// in parallel and the output does not depend on the thread count.
constexpr int64_t kChunk = int64_t{1} << 16;
// Chunks generated per write (2 MiB of bf16 each): the memory one tensor holds at a time.
constexpr int64_t kChunksPerWrite = 16;

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Status WriteCutConfig(const std::string& config_path, const ConfigCut& cut,
                      const std::string& out_path) {
  MX_ASSIGN_OR_RETURN(std::string text, ReadText(config_path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("{}: not a JSON object", config_path);
  const int n_layers = j.value("num_hidden_layers", 0);
  if (cut.layers >= 0) {
    if (cut.layers < 1 || cut.layers > n_layers) {
      return InvalidArgument("layers={}: must be in 1..{} (the config's num_hidden_layers)",
                             cut.layers, n_layers);
    }
    j["num_hidden_layers"] = cut.layers;
    for (const char* list : {"indexer_types", "mlp_layer_types"}) {
      if (j.contains(list) && j[list].is_array() && j[list].size() > size_t(cut.layers)) {
        j[list].erase(j[list].begin() + cut.layers, j[list].end());
      }
    }
  }
  if (cut.dense >= 0) {
    if (cut.dense > j["num_hidden_layers"].get<int>()) {
      return InvalidArgument("dense={}: must be <= layers ({})", cut.dense,
                             j["num_hidden_layers"].get<int>());
    }
    j["first_k_dense_replace"] = cut.dense;
    j.erase("mlp_layer_types");  // the first_k_dense_replace rule decides
  }
  if (cut.mtp >= 0) {
    if (cut.mtp > 1) return InvalidArgument("mtp={}: must be 0 or 1", cut.mtp);
    j["num_nextn_predict_layers"] = cut.mtp;
  }
  const std::string out = j.dump(2);
  MX_RETURN_IF_ERROR(ParseModelConfig(out, out_path).status());  // the cut still loads
  return WriteText(out_path, out);
}

Status WriteRandomBf16(const std::string& dir, uint64_t max_shard_bytes, uint64_t seed,
                       ThreadPool& pool) {
  MX_ASSIGN_OR_RETURN(ModelConfig cfg, LoadModelConfig(dir + "/config.json"));
  SafetensorsWriter w;
  for (const TensorSpec& spec : ExpectedTensors(cfg)) {
    const std::string name = spec.name;
    const int64_t n = spec.numel();
    const DType dt = spec.dtype;
    const bool norm = name.find("norm.weight") != std::string::npos ||
                      name.find("layernorm.weight") != std::string::npos;
    const bool zero = name.find("bias") != std::string::npos;
    const size_t esize = dt == DType::kF32 ? 4 : 2;
    const uint64_t name_seed = Mix(seed ^ std::hash<std::string>{}(name));
    MX_RETURN_IF_ERROR(w.AddLazy(name, dt, spec.shape, [=, &pool](ByteSink& out) -> Status {
      std::vector<uint8_t> buf;
      const int64_t n_chunks = (n + kChunk - 1) / kChunk;
      for (int64_t c0 = 0; c0 < n_chunks; c0 += kChunksPerWrite) {
        const int64_t c1 = std::min(n_chunks, c0 + kChunksPerWrite);
        const int64_t lo = c0 * kChunk, hi = std::min(n, c1 * kChunk);
        buf.resize((hi - lo) * esize);
        pool.parallel_for_dynamic(c0, c1, 1, [&](int64_t b, int64_t e, int) {
          for (int64_t c = b; c < e; ++c) {
            std::mt19937_64 rng(Mix(name_seed + static_cast<uint64_t>(c)));
            std::normal_distribution<float> g(0.0f, 0.02f);
            const int64_t i0 = c * kChunk, i1 = std::min(n, i0 + kChunk);
            for (int64_t i = i0; i < i1; ++i) {
              const float v = zero ? 0.0f : (norm ? 1.0f : g(rng));
              uint8_t* at = buf.data() + (i - lo) * esize;
              if (esize == 4) {
                std::memcpy(at, &v, 4);
              } else {
                const uint16_t h = F32ToBf16(v);
                std::memcpy(at, &h, 2);
              }
            }
          }
        });
        MX_RETURN_IF_ERROR(out.Write(buf.data(), buf.size()));
      }
      return Status::Ok();
    }));
  }
  return w.Write(dir, max_shard_bytes);
}

Status EnsureSyntheticTokenizer(const std::string& dir, tok::SyntheticVocab kind) {
  const fs::path path = fs::path(dir) / "tokenizer.json";
  if (fs::exists(path)) return Status::Ok();
  MX_ASSIGN_OR_RETURN(ModelConfig cfg, LoadModelConfig(dir + "/config.json"));
  std::vector<int32_t> special;
  for (int64_t id : cfg.eos_token_ids) special.push_back(static_cast<int32_t>(id));
  if (cfg.pad_token_id) special.push_back(static_cast<int32_t>(*cfg.pad_token_id));
  MX_ASSIGN_OR_RETURN(std::string text, tok::SyntheticTokenizerJson(
                                            static_cast<int32_t>(cfg.vocab_size), special, kind));
  return WriteText(path.string(), text);
}

}  // namespace mx::bench
