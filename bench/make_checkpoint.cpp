// Writes a random checkpoint of any GlmMoeDsa config, cut to a few layers with every width kept,
// for benchmarks at a real model's shapes: bf16, and quantized with the project's recipes (MXFP4:
// routed experts, the rest bf16; FP8: every linear layer but the embedding, lm_head and router,
// as the official GLM-5 FP8 checkpoints), each with a synthetic tokenizer. Streaming and sharded:
// a few MB of one tensor in memory at a time, whatever the model's size.
//
//   make_checkpoint config=../shared/configs/glm-5.2.json dir=/tmp/glm52-slice
//                   [layers=2] [dense=1] [mtp=0] [formats=bf16,mxfp4,fp8] [shard_gb=5] [seed=0]
//                   [threads=0] [tokenizer=printable-pairs|gguf-bpe]
//   → DIR/bf16, DIR/mxfp4, DIR/fp8 (a folder already holding a config.json is kept as it is, and
//     so is a tokenizer.json)
//
// tokenizer=gguf-bpe writes the vocabulary and pre-tokenizer that ../shared/anchors/hf_to_gguf.py
// puts in the GGUF it converts the bf16 folder to, so that mxserve and ik_llama.cpp's
// llama-server tokenize the same text to the same ids (side-by-side runs over text: chat
// completions, `bench sessions`); the default printable-pairs has no space tokens (its text
// splits into bytes and pairs) and only suits prompts sent as ids.
//
// layers / dense / mtp of -1 keep the config's value. GLM-5.2 cut to layers=2 dense=1 is about
// 24 GB in bf16, 10 GB with MXFP4 experts, 13 GB in FP8.
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "base/log.h"
#include "bench_util.h"
#include "quant/quantizer.h"
#include "random_checkpoint.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"config", ""},    {"dir", ""},
      {"layers", "2"},   {"dense", "1"},
      {"mtp", "0"},      {"formats", "bf16,mxfp4,fp8"},
      {"shard_gb", "5"}, {"seed", "0"},
      {"threads", "0"},  {"tokenizer", "printable-pairs"},
  };
  if (!mx::bench::ParseArgs(argc, argv, "make_checkpoint", a)) return 2;
  if (a["config"].empty() || a["dir"].empty()) {
    fmt::print(stderr, "make_checkpoint: config= and dir= are required (see the file's header)\n");
    return 2;
  }
  (void)mx::SetLogLevel("warn");
  auto die = [](const mx::Status& s) {
    fmt::print(stderr, "make_checkpoint: {}\n", s.ToString());
    return 1;
  };
  const std::string formats = "," + a["formats"] + ",";
  for (const std::string& f : mx::bench::Split(a["formats"])) {
    if (f != "bf16" && f != "mxfp4" && f != "fp8") {
      fmt::print(stderr, "make_checkpoint: formats: '{}' is not bf16, mxfp4 or fp8\n", f);
      return 2;
    }
  }
  const auto vocab = mx::tok::ParseSyntheticVocab(a["tokenizer"]);
  if (!vocab.ok()) {
    fmt::print(stderr, "make_checkpoint: tokenizer: {}\n", vocab.status().message());
    return 2;
  }
  const uint64_t shard = static_cast<uint64_t>(std::stod(a["shard_gb"]) * 1e9);
  mx::ThreadPool pool(std::stoi(a["threads"]));
  const std::string bf16_dir = a["dir"] + "/bf16";
  // The bf16 checkpoint is always written (the quantized ones are made from it).
  if (!fs::exists(bf16_dir + "/config.json")) {
    const std::string tmp = a["dir"] + "/bf16.partial";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const mx::bench::ConfigCut cut{std::stoi(a["layers"]), std::stoi(a["dense"]),
                                   std::stoi(a["mtp"])};
    if (auto s = mx::bench::WriteCutConfig(a["config"], cut, tmp + "/config.json"); !s.ok()) {
      return die(s);
    }
    fmt::print("writing random bf16 weights to {} ...\n", bf16_dir);
    std::fflush(stdout);
    const double t0 = mx::bench::Now();
    if (auto s = mx::bench::WriteRandomBf16(tmp, shard, std::stoull(a["seed"]), pool); !s.ok()) {
      return die(s);
    }
    fs::rename(tmp, bf16_dir);
    fmt::print("  {:.0f} s\n", mx::bench::Now() - t0);
  }
  if (auto s = mx::bench::EnsureSyntheticTokenizer(bf16_dir, *vocab); !s.ok()) return die(s);
  for (const char* f : {"mxfp4", "fp8"}) {
    const std::string out = a["dir"] + "/" + f;
    if (formats.find(fmt::format(",{},", f)) == std::string::npos) continue;
    if (!fs::exists(out + "/config.json")) {
      fmt::print("quantizing to {} (the default {} recipe) ...\n", out, f);
      std::fflush(stdout);
      mx::quant::QuantizeOptions qo;
      qo.format = f;
      qo.max_shard_bytes = shard;
      qo.threads = pool.size();
      const double t0 = mx::bench::Now();
      auto sum = mx::quant::QuantizeCheckpoint(bf16_dir, out, qo);
      if (!sum.ok()) return die(sum.status());
      fmt::print("  {:.0f} s, {:.2f} GB -> {:.2f} GB\n", mx::bench::Now() - t0, sum->in_bytes / 1e9,
                 sum->out_bytes / 1e9);
    }
    if (auto s = mx::bench::EnsureSyntheticTokenizer(out, *vocab); !s.ok()) return die(s);
  }
  return 0;
}
