// `mxserve logits MODEL_DIR --ids 5,17,200 --out FILE.safetensors [--hidden] [--mtp]
// [--topk-sets]`: one causal prefill per sequence; writes float32 logits [T, vocab] and, on
// request, the final-norm hidden states [T, hidden], the MTP layer's logits [T, vocab] (row t
// from (hidden[t], token t+1), predicting t+2; the last row uses the argmax of the main logits
// as token T) and the indexer's selected positions [L, T, index_topk] (-1 padded). With
// --ids-file (one sequence per line) every name gets the prefix "seq{i}.".
// Works on a checkpoint directory without tokenizer files.
#include <algorithm>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "base/thread_pool.h"
#include "cli/cli_util.h"
#include "cli/verb.h"
#include "engine/model_factory.h"
#include "engine/sampler.h"
#include "io/safetensors_writer.h"
#include "model/kv_store.h"
#include "model/model.h"

namespace mx::cli {
namespace {

struct LogitsArgs {
  std::string model_dir;
  std::string ids;
  std::string ids_file;
  std::string out;
  bool hidden = false;
  bool mtp = false;
  bool topk_sets = false;
  std::optional<KernelLevel> kernels;  // nullopt: this CPU's best
  GemmActivations gemm_activations =
      GemmActivations::kFp32;  // exact offline, as its f32 KV default
  std::string kv_cache_dtype = "auto";
};

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Status RunOne(const Model& model, const std::vector<int32_t>& ids, const LogitsArgs& a,
              const KernelTable& kt, ThreadPool& pool, const std::string& prefix,
              SafetensorsWriter& w) {
  const ModelConfig& c = model.config();
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t V = c.vocab_size, D = c.hidden_size, L = c.num_hidden_layers;
  if (T > c.max_position_embeddings) {
    return InvalidArgument("{} ids exceed the context window ({})", T, c.max_position_embeddings);
  }
  ForwardOptions opts;
  opts.logits = LogitsMode::kAll;
  opts.want_topk = a.topk_sets;
  ForwardBatch batch;
  batch.seqs.push_back({0, 0, ids, {}});
  MX_ASSIGN_OR_RETURN(auto kv, MakeOfflineKvStore(c, a.kv_cache_dtype, T));
  MX_ASSIGN_OR_RETURN(ForwardOutput out, model.Forward(batch, opts, *kv, kt, pool));
  MX_RETURN_IF_ERROR(w.AddOwned(prefix + "logits", DType::kF32, {T, V}, Bytes(out.logits)));
  if (a.hidden) {
    MX_RETURN_IF_ERROR(w.AddOwned(prefix + "hidden", DType::kF32, {T, D}, Bytes(out.final_hidden)));
  }
  if (a.topk_sets) {
    if (!c.has_indexer) return InvalidArgument("--topk-sets: this model has no DSA indexer");
    std::vector<int32_t> all;
    for (const auto& layer : out.topk) all.insert(all.end(), layer.begin(), layer.end());
    MX_RETURN_IF_ERROR(
        w.AddOwned(prefix + "topk_sets", DType::kI32, {L, T, c.index_topk}, Bytes(all)));
  }
  if (a.mtp) {
    if (c.num_nextn_predict_layers == 0)
      return InvalidArgument("--mtp: this model has no MTP layer");
    std::vector<int32_t> next(ids.begin() + 1, ids.end());
    next.push_back(Argmax(std::span<const float>(out.logits.data() + (T - 1) * V, V)));
    ForwardBatch mb;
    mb.seqs.push_back({0, 0, ids, next});
    MX_ASSIGN_OR_RETURN(auto kv2, MakeOfflineKvStore(c, a.kv_cache_dtype, T));
    ForwardOptions mo;
    mo.logits = LogitsMode::kNone;
    MX_ASSIGN_OR_RETURN(ForwardOutput mout, model.Forward(mb, mo, *kv2, kt, pool));
    MX_RETURN_IF_ERROR(
        w.AddOwned(prefix + "mtp_logits", DType::kF32, {T, V}, Bytes(mout.mtp_logits)));
    MX_RETURN_IF_ERROR(w.AddOwned(prefix + "mtp_next_ids", DType::kI32, {T}, Bytes(next)));
  }
  return Status::Ok();
}

int RunLogits(const LogitsArgs& a) {
  if (a.ids.empty() == a.ids_file.empty()) {
    std::fprintf(stderr, "mxserve logits: give exactly one of --ids or --ids-file\n");
    return 2;
  }
  ModelLoadOptions lo;
  lo.model_dir = a.model_dir;
  lo.kernels = a.kernels;
  lo.gemm_activations = a.gemm_activations;
  lo.untuned_moe = true;  // the reference numerics: the default MoE kernel config
  lo.tokenizer = TokenizerLoad::kNone;
  auto loaded = LoadModel(lo);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const Model& model = *loaded->model;
  const KernelTable& kt = *loaded->kernels;
  const int64_t V = model.config().vocab_size;
  std::vector<std::vector<int32_t>> seqs;
  if (!a.ids.empty()) {
    auto ids = ParseIdList(a.ids, V, "--ids");
    if (!ids.ok()) return Fail(ids.status().message());
    seqs.push_back(std::move(*ids));
  } else {
    std::ifstream f(a.ids_file);
    if (!f) return Fail(a.ids_file + ": cannot open");
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto ids = ParseIdList(line, V, fmt::format("{} line {}", a.ids_file, n));
      if (!ids.ok()) return Fail(ids.status().message());
      seqs.push_back(std::move(*ids));
    }
    if (seqs.empty()) return Fail(a.ids_file + ": no sequences");
  }
  ThreadPool pool(Globals().threads);
  SafetensorsWriter w;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string prefix = a.ids_file.empty() ? "" : fmt::format("seq{}.", i);
    Status st = RunOne(model, seqs[i], a, kt, pool, prefix, w);
    if (!st.ok()) return Fail(st.message());
  }
  Status st = w.WriteFile(a.out);
  if (!st.ok()) return Fail(st.message());
  std::fprintf(stderr, "wrote %zu tensor(s) for %zu sequence(s) to %s\n", w.num_tensors(),
               seqs.size(), a.out.c_str());
  return 0;
}

VerbRun SetupLogits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  auto* sub = app.add_subcommand("logits",
                                 "One prefill over token ids; writes logits (and more) "
                                 "to a safetensors file");
  sub->add_option("model_dir", a->model_dir, "Hugging Face checkpoint directory")->required();
  sub->add_option("--ids", a->ids, "comma-separated token ids");
  sub->add_option("--ids-file", a->ids_file, "one comma-separated sequence per line");
  sub->add_option("--out", a->out, "output .safetensors file")->required();
  sub->add_flag("--hidden", a->hidden, "also write the final-norm hidden states [T, hidden]");
  sub->add_flag("--mtp", a->mtp, "also write the MTP layer's logits [T, vocab]");
  sub->add_flag("--topk-sets", a->topk_sets, "also write the indexer's selected positions");
  AddKernelFlags(sub, &a->kernels, &a->gemm_activations);
  sub->add_option("--kv-cache-dtype", a->kv_cache_dtype,
                  "auto (= f32, exact) | bf16 | fp8_e4m3 | fp8_e4m3fnuz")
      ->capture_default_str();
  return [a]() -> int { return RunLogits(*a); };
}

MX_REGISTER_VERB(logits, "logits", 60, SetupLogits);

}  // namespace
}  // namespace mx::cli
