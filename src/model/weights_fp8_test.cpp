// FP8 block-scaled checkpoints through the loader and the forward. The tiny checkpoint quantized
// by `quantize --format fp8` (every matrix FP8 but the embedding, lm_head, routers, indexer
// weights_proj and MTP eh_proj) against the same model with those weights dequantized into an
// F32 checkpoint here (fp32(value · scale), the FP8 kernels' dequantized weights exactly, so
// the two differ only by fp32 summation order): prefill logits, MTP logits and greedy decode.
// Also: the mixed checkpoint (MXFP4 experts + FP8 attention / shared experts + bf16 rest),
// tensor / expert parallel shards, and malformed FP8 checkpoints failing with one error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/numerics.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/weight_bytes.h"
#include "quant/quantizer.h"

namespace mx::weights_fp8_test {
namespace {

namespace fs = std::filesystem;

// The FP8 model and its dequantized twin compute the same products in another fp32 order:
// |fp8 − dequantized| per logit within this fraction of the largest |logit|.
constexpr float kOrderTolerance = 1e-4f;
// MXFP4 experts quantize their activations to int8 (kernels/mxfp4.h): a last-bit change of an
// activation can flip one int8 rounding (model_parallel_test.cpp's kTpLogitToleranceMxfp4).
constexpr float kMxfp4Tolerance = 1e-2f;

struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    for (const auto& d : dirs) fs::remove_all(d);
  }
};

// A fresh temporary directory path named `tag` (removed at exit).
fs::path Temp(const std::string& tag) {
  static TempDirs t;
  const fs::path p = fs::temp_directory_path() / fmt::format("mx_fp8_{}_{}", tag, ::getpid());
  fs::remove_all(p);
  t.dirs.push_back(p);
  return p;
}

std::string Quantized(const std::string& src, const std::string& tag, const std::string& format,
                      std::vector<std::string> exclude = {}) {
  const fs::path out = Temp(tag);
  quant::QuantizeOptions o;
  o.format = format;
  o.threads = 2;
  o.exclude = std::move(exclude);
  auto r = quant::QuantizeCheckpoint(src, out.string(), o);
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString();
    std::abort();
  }
  return out.string();
}

const std::string& Fp8Tiny() {
  static const std::string d = Quantized(TestCheckpointDir("tiny"), "tiny", "fp8");
  return d;
}

// Copies checkpoint `src` to `dst` with every tensor through `custom` (true: it wrote its own
// version or dropped it) and config.json through `edit_config`.
void Rewrite(
    const std::string& src, const fs::path& dst,
    const std::function<bool(const Checkpoint&, const TensorView&, SafetensorsWriter&)>& custom,
    const std::function<void(nlohmann::ordered_json&)>& edit_config) {
  auto c = Checkpoint::Open(src);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  fs::create_directories(dst);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    if (fs::exists(fs::path(src) / f)) fs::copy_file(fs::path(src) / f, dst / f);
  }
  std::ifstream in(fs::path(src) / "config.json");
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
  edit_config(cfg);
  std::ofstream(dst / "config.json") << cfg.dump(2);
  SafetensorsWriter sw;
  for (const TensorView* v : c->tensors()) {
    if (custom(*c, *v, sw)) continue;
    ASSERT_TRUE(
        sw.AddOwned(v->name, v->dtype, v->shape, std::vector<uint8_t>(v->data, v->data + v->nbytes))
            .ok());
  }
  ASSERT_TRUE(sw.Write(dst.string()).ok());
}

// `src` with every FP8 weight dequantized to F32 and no quantization_config.
std::string Dequantized(const std::string& src, const std::string& tag) {
  const fs::path out = Temp(tag);
  Rewrite(
      src, out,
      [](const Checkpoint& c, const TensorView& v, SafetensorsWriter& sw) {
        if (v.name.ends_with("_scale_inv")) return true;
        if (v.dtype != DType::kF8_E4M3) return false;
        const TensorView* s = c.Find(v.name + "_scale_inv");
        const int64_t n = v.shape[0], k = v.shape[1], kb = (k + 127) / 128;
        std::vector<uint8_t> bytes(n * k * 4);
        for (int64_t i = 0; i < n * k; ++i) {
          float sc;
          std::memcpy(&sc, s->data + 4 * ((i / k) / 128 * kb + (i % k) / 128), 4);
          const float d = Fp8E4M3FnToF32(v.data[i]) * sc;
          std::memcpy(bytes.data() + 4 * i, &d, 4);
        }
        EXPECT_TRUE(sw.AddOwned(v.name, DType::kF32, v.shape, std::move(bytes)).ok());
        return true;
      },
      [](nlohmann::ordered_json& cfg) { cfg.erase("quantization_config"); });
  return out.string();
}

struct GenRun {
  std::vector<float> logits, mtp_logits;  // prefill, every row
  std::vector<int32_t> greedy;            // decode continuation
};

// Prefill with MTP logits, then 16 greedy decode steps; with `comm`, one rank of a group.
GenRun Generate(const Model& m, Communicator* comm = nullptr) {
  GenRun run;
  const int64_t V = m.config().vocab_size;
  ContiguousKvStore kv(m.config(), 64);
  ThreadPool pool(2);
  SequenceInput s;
  s.seq = kv.AddSequence();
  s.tokens = {1, 5, 9, 17, 33, 65, 129, 200};
  s.mtp_next = {5, 9, 17, 33, 65, 129, 200, 7};
  ForwardBatch b;
  b.seqs.push_back(s);
  ForwardOptions opts;
  opts.logits = LogitsMode::kAll;
  opts.comm = comm;
  auto out = m.Forward(b, opts, kv, SelectKernels(), pool);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return run;
  run.logits = out->logits;
  run.mtp_logits = out->mtp_logits;
  int32_t next = ArgMax(out->logits.data() + 7 * V, V);
  opts.logits = LogitsMode::kLast;
  for (int step = 0; step < 16; ++step) {
    run.greedy.push_back(next);
    ForwardBatch d;
    d.seqs.push_back({s.seq, 8 + step, {next}, {}, false});
    auto o = m.Forward(d, opts, kv, SelectKernels(), pool);
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    if (!o.ok()) return run;
    next = ArgMax(o->logits.data(), V);
  }
  return run;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float rel,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(want.empty()) << what;
  float worst = 0, scale = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " " << i;
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  std::printf("[%s] logits max abs diff %.3g (largest |logit| %.3g)\n", what.c_str(), worst, scale);
  EXPECT_LE(worst, rel * scale) << what;
}

TEST(Fp8Weights, TinyLoadsInFp8AndMatchesItsDequantizedTwin) {
  auto m = Model::Load(Fp8Tiny());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelWeights& w = (*m)->weights();
  EXPECT_EQ(w.layers[0].attn.q_a_proj.dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.layers[0].mlp.down_proj.dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.layers[1].moe.experts[2].up_proj.dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.mtp.layer.moe.shared_experts.gate_proj.dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.layers[1].moe.gate.dtype, DType::kBF16);
  EXPECT_EQ(w.embed_tokens.dtype, DType::kBF16);
  EXPECT_EQ(w.mtp.eh_proj.dtype, DType::kBF16);
  // A byte per weight and 4 per block: q_a_proj [32, 64] is one block.
  EXPECT_EQ(WeightBytes(w.layers[0].attn.q_a_proj), 32 * 64 + 4);
  auto d = Model::Load(Dequantized(Fp8Tiny(), "tiny_deq"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const GenRun a = Generate(**m), b = Generate(**d);
  ExpectClose(a.logits, b.logits, kOrderTolerance, "tiny fp8 vs dequantized, prefill");
  ExpectClose(a.mtp_logits, b.mtp_logits, kOrderTolerance, "tiny fp8 vs dequantized, MTP");
  EXPECT_EQ(a.greedy, b.greedy);
}

// Quantizing at test time reproduces the committed FP8 copies bit for bit; their forward and
// greedy continuation are pinned to the PyTorch reference on the dequantized weights at every
// kernel level (model_forward_test.cpp, FixtureTest on tiny-fp8 and tiny-glm52-fp8).
TEST(Fp8Weights, QuantizingReproducesTheCommittedFp8Copies) {
  ExpectSameTensors(Fp8Tiny(), TestCheckpointDir("tiny-fp8"));
  ExpectSameTensors(Quantized(TestCheckpointDir("tiny-glm52"), "tiny_glm52", "fp8"),
                    TestCheckpointDir("tiny-glm52-fp8"));
}

// Sharded (model.safetensors.index.json, a tensor's weight and its weight_scale_inv free to
// land in different shards): the same weights as the single file, so the same bits out.
TEST(Fp8Weights, ShardedCheckpointLoadsAndRunsAsTheSingleFile) {
  const fs::path out = Temp("tiny_sharded");
  quant::QuantizeOptions o;
  o.format = "fp8";
  o.threads = 2;
  o.max_shard_bytes = 60'000;
  auto r = quant::QuantizeCheckpoint(TestCheckpointDir("tiny"), out.string(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->num_shards, 3);
  ASSERT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  auto sharded = Model::Load(out.string());
  ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
  auto single = Model::Load(TestCheckpointDir("tiny-fp8"));
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ((*sharded)->weights().layers[2].attn.o_proj.dtype, DType::kF8_E4M3);
  const GenRun a = Generate(**sharded), b = Generate(**single);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.mtp_logits, b.mtp_logits);
  EXPECT_EQ(a.greedy, b.greedy);
}

// The MTP layer (layer 4) kept bf16 by --exclude under its checkpoint name, the rest FP8.
TEST(Fp8Weights, MtpLayerInBf16MatchesItsDequantizedTwin) {
  const std::string dir =
      Quantized(TestCheckpointDir("tiny"), "tiny_mtp_bf16", "fp8", {"re:model\\.layers\\.4\\..*"});
  auto m = Model::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->weights().mtp.layer.attn.q_a_proj.dtype, DType::kBF16);
  EXPECT_EQ((*m)->weights().layers[3].attn.q_a_proj.dtype, DType::kF8_E4M3);
  auto d = Model::Load(Dequantized(dir, "tiny_mtp_bf16_deq"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const GenRun a = Generate(**m), b = Generate(**d);
  ExpectClose(a.mtp_logits, b.mtp_logits, kOrderTolerance, "tiny fp8, MTP bf16, MTP logits");
  EXPECT_EQ(a.greedy, b.greedy);
}

// MXFP4 experts + FP8 attention, dense and shared experts + bf16 rest, made from the FP8
// checkpoint, against the same made from the dequantized one (its MXFP4 bytes are identical:
// quantizer_fp8_test.cpp).
TEST(Fp8Weights, MixedMxfp4AndFp8CheckpointLoadsAndRuns) {
  const std::string mixed = Quantized(Fp8Tiny(), "mixed", "mxfp4");
  auto m = Model::Load(mixed);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelWeights& w = (*m)->weights();
  EXPECT_TRUE(w.layers[2].moe.experts[1].down_proj.is_mxfp4());
  EXPECT_EQ(w.layers[2].moe.shared_experts.down_proj.dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.layers[2].attn.kv_b_proj.dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.lm_head.dtype, DType::kBF16);
  auto ref = Model::Load(Quantized(Dequantized(Fp8Tiny(), "mixed_deq_src"), "mixed_deq", "mxfp4"));
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const GenRun a = Generate(**m), b = Generate(**ref);
  ExpectClose(a.logits, b.logits, kMxfp4Tolerance, "tiny mixed vs dequantized mixed");
  EXPECT_EQ(a.greedy, b.greedy);
}

// tiny's row-parallel slices (o_proj: 40 of 80 columns) split a 128-column block: refused,
// naming the tensor. With the row-parallel weights kept bf16, the column-parallel FP8 weights
// are sliced by rows at any offset (a 128-row block shared by two ranks) and the shards give the
// whole FP8 model's tokens.
TEST(Fp8Weights, ShardsSliceRowsAnywhereAndRefuseSplitBlocks) {
  auto tp = Model::Load(Fp8Tiny(), nullptr, ModelShard{1, 2, false});
  ASSERT_FALSE(tp.ok());
  EXPECT_NE(tp.status().message().find("o_proj.weight"), std::string::npos)
      << tp.status().ToString();
  EXPECT_NE(tp.status().message().find("128-element block"), std::string::npos);
  const std::string cols =
      Quantized(TestCheckpointDir("tiny"), "tiny_cols", "fp8", {"re:.*\\.(o_proj|down_proj)"});
  auto whole = Model::Load(cols);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ((*whole)->weights().layers[1].attn.q_b_proj.dtype, DType::kF8_E4M3);
  const GenRun ref = Generate(**whole);
  for (bool ep : {false, true}) {
    const std::vector<GenRun> runs = RunSharded<GenRun>(
        cols, 2, ep, [](const Model& m, Communicator* comm) { return Generate(m, comm); });
    ASSERT_EQ(runs.size(), 2u);
    for (const GenRun& r : runs) {
      ExpectClose(r.logits, ref.logits, kOrderTolerance, ep ? "fp8 ep2" : "fp8 tp2");
      EXPECT_EQ(r.greedy, ref.greedy);
    }
  }
}

TEST(Fp8Weights, MalformedCheckpointFailsWithOneErrorListingEveryTensor) {
  const fs::path bad = Temp("bad");
  const std::string a = "model.layers.0.self_attn.q_a_proj.weight",
                    b = "model.layers.1.self_attn.kv_b_proj.weight",
                    c = "model.layers.2.mlp.experts.4.up_proj.weight";
  Rewrite(
      Fp8Tiny(), bad,
      [&](const Checkpoint&, const TensorView& v, SafetensorsWriter& sw) {
        if (v.name == a + "_scale_inv") return true;  // missing
        if (v.name == b + "_scale_inv") {             // wrong shape
          EXPECT_TRUE(sw.AddOwned(v.name, DType::kF32, {3, 1}, std::vector<uint8_t>(12, 0)).ok());
          return true;
        }
        if (v.name == c + "_scale_inv") {  // wrong dtype
          EXPECT_TRUE(sw.AddOwned(v.name, DType::kBF16, {1, 1}, std::vector<uint8_t>(2, 0)).ok());
          return true;
        }
        return false;
      },
      [](nlohmann::ordered_json& cfg) {
        cfg["quantization_config"]["weight_block_size"] = {64, 64};
      });
  auto m = Model::Load(bad.string());
  ASSERT_FALSE(m.ok());
  const std::string msg = m.status().message();
  for (const std::string& want :
       {a + ": FP8 weight", b + ": FP8 weight", c + ": FP8 weight", std::string("found none"),
        std::string("found F32 [3, 1]"), std::string("found BF16 [1, 1]"),
        std::string("weight_block_size [64, 64]")}) {
    EXPECT_NE(msg.find(want), std::string::npos) << want << "\n" << msg;
  }
}

TEST(Fp8Weights, Fp8WithoutAnFp8ConfigFails) {
  const fs::path dst = Temp("noconfig");
  Rewrite(
      Fp8Tiny(), dst,
      [](const Checkpoint&, const TensorView&, SafetensorsWriter&) { return false; },
      [](nlohmann::ordered_json& cfg) { cfg.erase("quantization_config"); });
  auto m = Model::Load(dst.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("has no fp8 quantization_config"), std::string::npos)
      << m.status().message();
}

// A NaN embedding row is caught after the first layer with the first row it reaches (rows
// before it attend no NaN; every row from it on does), in a batch wide enough that the check
// runs over the pool, and again in the pruned pass the engine runs.
TEST(ForwardChecks, NonFiniteHiddenStateIsAnErrorNamingItsRow) {
  const fs::path dst = Temp("nan-embed");
  const int32_t bad = 9;
  Rewrite(
      TestCheckpointDir("tiny"), dst,
      [&](const Checkpoint&, const TensorView& v, SafetensorsWriter& sw) {
        if (v.name != "model.embed_tokens.weight") return false;
        std::vector<uint8_t> bytes(v.data, v.data + v.nbytes);
        const int64_t D = v.shape[1], es = static_cast<int64_t>(DTypeSize(v.dtype));
        for (int64_t d = 0; d < D; ++d) {
          uint8_t* x = bytes.data() + (bad * D + d) * es;
          if (v.dtype == DType::kF32) {
            const float nan = std::numeric_limits<float>::quiet_NaN();
            std::memcpy(x, &nan, 4);
          } else {
            const uint16_t nan = 0x7fc0;  // bf16 / the high half of an fp32 NaN
            std::memcpy(x, &nan, 2);
          }
        }
        EXPECT_TRUE(sw.AddOwned(v.name, v.dtype, v.shape, std::move(bytes)).ok());
        return true;
      },
      [](nlohmann::ordered_json&) {});
  auto m = Model::Load(dst.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ThreadPool pool(2);
  std::vector<int32_t> ids(24);
  for (int32_t i = 0; i < 24; ++i) ids[i] = 20 + i;
  ids[13] = bad;
  for (bool prune : {false, true}) {
    ContiguousKvStore kv((*m)->config(), 32);
    ForwardBatch b;
    b.seqs.push_back({kv.AddSequence(), 0, ids, {}});
    ForwardOptions o;
    o.prune_last_layer = prune;
    auto out = (*m)->Forward(b, o, kv, SelectKernels(), pool);
    ASSERT_FALSE(out.ok());
    const std::string msg = out.status().message();
    EXPECT_NE(msg.find("non-finite value nan in the hidden state after layer 0 (row 13, column 0)"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace mx::weights_fp8_test
