// MXFP4 checkpoints through the loader and the forward: a tiny checkpoint quantized by
// quant::QuantizeCheckpoint (routed experts MXFP4, everything else bf16 and listed in the Quark
// exclude list) loads, runs with MTP and equals the committed tests/data/tiny-mxfp4 bit for bit;
// and the loader's cross-check of the file against quantization_config, including the reported
// failure: the MTP layer's bf16 shared expert excluded under its checkpoint name
// `model.layers.{L}.*` or sglang's `model.decoder.*` loads, and with the entry removed the load
// fails with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/model_test_util.h"
#include "model/tensor_plan.h"
#include "model/weight_bytes.h"
#include "quant/quantizer.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

// Removes the temporary checkpoints at exit.
struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    for (const auto& d : dirs) fs::remove_all(d);
  }
};
TempDirs& Temps() {
  static TempDirs t;
  return t;
}

// The tiny checkpoint quantized once per process into a temporary directory.
const std::string& QuantizedTiny() {
  static const std::string dir = [] {
    const fs::path out = fs::temp_directory_path() / fmt::format("mx_q_tiny_{}", ::getpid());
    fs::remove_all(out);
    Temps().dirs.push_back(out);
    quant::QuantizeOptions o;
    o.threads = 2;
    auto r = quant::QuantizeCheckpoint(TestCheckpointDir("tiny"), out.string(), o);
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      std::abort();
    }
    return out.string();
  }();
  return dir;
}

// A copy of the quantized checkpoint whose exclude list is edited by `edit`.
std::string WithExclude(const std::string& name,
                        const std::function<void(std::vector<std::string>&)>& edit) {
  const fs::path dst = fs::path(QuantizedTiny()).string() + "_" + name;
  fs::remove_all(dst);
  Temps().dirs.push_back(dst);
  fs::copy(QuantizedTiny(), dst, fs::copy_options::recursive);
  std::ifstream in(dst / "config.json");
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
  std::vector<std::string> ex = cfg["quantization_config"]["exclude"];
  edit(ex);
  cfg["quantization_config"]["exclude"] = ex;
  std::ofstream(dst / "config.json") << cfg.dump(2);
  return dst.string();
}

// Drops every exclude entry of the MTP layer's (layer 4) shared expert.
void DropMtpSharedExpert(std::vector<std::string>& ex) {
  std::erase_if(ex, [](const std::string& e) {
    return e.rfind("model.layers.4.mlp.shared_experts.", 0) == 0;
  });
}

Result<ForwardOutput> RunWithMtp(const Model& m) {
  ContiguousKvStore kv(m.config(), 64);
  ForwardBatch b;
  SequenceInput s;
  s.seq = kv.AddSequence();
  s.tokens = {1, 5, 9, 17, 33, 65, 129, 200};
  s.mtp_next = {5, 9, 17, 33, 65, 129, 200, 7};
  b.seqs.push_back(s);
  ForwardOptions opts;
  opts.logits = LogitsMode::kAll;
  ThreadPool pool(2);
  return m.Forward(b, opts, kv, SelectKernels(), pool);
}

TEST(Mxfp4Weights, QuantizedTinyLoadsWithMxfp4ExpertsAndRunsMtp) {
  auto m = Model::Load(QuantizedTiny());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelWeights& w = (*m)->weights();
  EXPECT_TRUE(w.layers[1].moe.experts[0].gate_proj.is_mxfp4());
  EXPECT_TRUE(w.mtp.layer.moe.experts[3].down_proj.is_mxfp4());
  EXPECT_FALSE(w.mtp.layer.moe.shared_experts.up_proj.is_mxfp4());
  EXPECT_FALSE(w.layers[1].attn.q_a_proj.is_mxfp4());
  auto out = RunWithMtp(**m);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->mtp_logits.empty());
  for (float v : out->mtp_logits) ASSERT_TRUE(std::isfinite(v));

  // Quantizing at test time reproduces the committed tests/data/tiny-mxfp4 bit for bit, and
  // that checkpoint's forward and greedy continuation are pinned to the PyTorch reference on
  // its dequantized weights at every kernel level (model_forward_test.cpp, Mxfp4FixtureTest).
  ExpectSameTensors(QuantizedTiny(), TestCheckpointDir("tiny-mxfp4"));
  auto ref = RunWithMtp(TestModel("tiny-mxfp4"));
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  EXPECT_EQ(out->logits, ref->logits);
  EXPECT_EQ(out->mtp_logits, ref->mtp_logits);
}

TEST(Mxfp4Weights, MtpSharedExpertExcludedUnderCheckpointGlobLoads) {
  const std::string dir = WithExclude("ckpt_glob", [](std::vector<std::string>& ex) {
    DropMtpSharedExpert(ex);
    ex.push_back("model.layers.4.mlp.shared_experts.*");
  });
  auto m = Model::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto out = RunWithMtp(**m);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
}

TEST(Mxfp4Weights, MtpSharedExpertExcludedUnderSglangNameLoads) {
  for (const std::string entry :
       {"model.decoder.mlp.shared_experts.*", "model.decoder.mlp.shared_experts",
        "re:model\\.decoder\\.mlp\\.shared_experts\\."}) {
    const std::string dir = WithExclude("sglang", [&](std::vector<std::string>& ex) {
      DropMtpSharedExpert(ex);
      ex.push_back(entry);
    });
    auto m = Model::Load(dir);
    ASSERT_TRUE(m.ok()) << entry << ": " << m.status().ToString();
    auto out = RunWithMtp(**m);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  }
}

TEST(Mxfp4Weights, MtpSharedExpertNotExcludedFailsClearly) {
  const std::string dir = WithExclude("missing", DropMtpSharedExpert);
  auto m = Model::Load(dir);
  ASSERT_FALSE(m.ok());
  const std::string msg = m.status().message();
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(msg.find("model.layers.4.mlp.shared_experts.gate_proj.weight"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("expected MXFP4 U8 [32, 32]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found BF16 [32, 64]"), std::string::npos) << msg;
  std::printf("%s\n", msg.c_str());
}

TEST(Mxfp4Weights, ExcludedButMxfp4InFileFails) {
  const std::string dir = WithExclude("wrong", [](std::vector<std::string>& ex) {
    ex.push_back("model.layers.2.mlp.experts.3.up_proj");
  });
  auto m = Model::Load(dir);
  ASSERT_FALSE(m.ok());
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("model.layers.2.mlp.experts.3.up_proj.weight: quantization_config.exclude "
                     "entry 'model.layers.2.mlp.experts.3.up_proj'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("expected BF16 [32, 64], found U8 [32, 32]"), std::string::npos) << msg;
}

TEST(Mxfp4Weights, Mxfp4WithoutConfigFails) {
  const fs::path dst = QuantizedTiny() + "_noconfig";
  fs::remove_all(dst);
  Temps().dirs.push_back(dst);
  fs::copy(QuantizedTiny(), dst, fs::copy_options::recursive);
  std::ifstream in(dst / "config.json");
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
  cfg.erase("quantization_config");
  std::ofstream(dst / "config.json") << cfg.dump(2);
  auto m = Model::Load(dst.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("has no MXFP4 (quark fp4) quantization_config"),
            std::string::npos)
      << m.status().message();
}

// One decode step's weight bytes, recomputed from the config's tensor list: every 2-D weight of
// the main model but the embedding, routed experts only where the router picked them, MXFP4
// experts at 17/32 bytes per weight (codes and E8M0 scales), the rest at bf16's 2.
double ExpectedStepBytes(const ModelConfig& c, const ForwardOutput& out, bool mxfp4_experts) {
  double b = 0;
  for (const TensorSpec& s : ExpectedTensors(c)) {
    if (s.shape.size() != 2 || s.name == "model.embed_tokens.weight") continue;
    if (s.layer >= c.num_hidden_layers) continue;  // the MTP layer
    const double n = static_cast<double>(s.numel());
    if (!s.routed_expert) {
      b += n * (s.dtype == DType::kF32 ? 4 : 2);
      continue;
    }
    const std::string pre = fmt::format("model.layers.{}.mlp.experts.", s.layer);
    const int e = std::stoi(s.name.substr(pre.size()));
    const auto& picked = out.router.at(s.layer).experts;
    if (std::find(picked.begin(), picked.end(), e) == picked.end()) continue;
    b += mxfp4_experts ? n * 17 / 32 : n * 2;
  }
  return b;
}

TEST(Mxfp4Weights, StepWeightBytesCountsStoredFormatAndPickedExperts) {
  auto q = Model::Load(QuantizedTiny());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const Model& base = TestModel("tiny");
  const Model* quantized = q->get();
  for (const Model* m : {&base, quantized}) {
    ContiguousKvStore kv(m->config(), 64);
    ForwardBatch b;
    SequenceInput s;
    s.seq = kv.AddSequence();
    s.tokens = {7, 100, 3};  // 3 rows: up to 6 of the 8 experts per layer
    b.seqs.push_back(s);
    ForwardOptions opts;
    opts.want_router = true;
    ThreadPool pool(1);
    auto out = m->Forward(b, opts, kv, SelectKernels(), pool);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->router.size(), 3u);  // layers 1..3 are MoE
    const bool mx = m != &base;
    const double want = ExpectedStepBytes(m->config(), *out, mx);
    EXPECT_EQ(StepWeightBytes(m->weights(), out->router), want) << (mx ? "mxfp4" : "bf16");
    // Without the router's choices no routed expert counts, and fewer bytes remain.
    EXPECT_LT(StepWeightBytes(m->weights(), {}), want);
  }
  EXPECT_EQ(WeightBytes(q->get()->weights().layers[1].moe.experts[0].gate_proj), 32 * 64 * 17 / 32);
  // An expert picked by several rows counts once; one picked by none not at all.
  const ModelWeights& w = quantized->weights();
  std::map<int64_t, RouterChoice> once, twice;
  once[1].experts = {0, 5};
  twice[1].experts = {5, 0, 0, 5};
  const double per_expert = 3 * 32 * 64 * 17 / 32;
  EXPECT_EQ(StepWeightBytes(w, twice), StepWeightBytes(w, once));
  EXPECT_EQ(StepWeightBytes(w, once), StepWeightBytes(w, {}) + 2 * per_expert);
  // An id outside the layer's experts is a programmer error: a CHECK naming both values.
  std::map<int64_t, RouterChoice> bad;
  bad[1].experts = {8};  // tiny has experts 0..7
  EXPECT_DEATH(StepWeightBytes(w, bad), "lw.moe.experts.size");
}

// The per-op MACs split by the dot product that runs them: with MXFP4 routed experts their MACs
// (num_experts_per_tok per row) are the int8 ones, everything else (the bf16 shared expert
// included) stays bf16; the totals do not depend on the format.
TEST(Mxfp4Weights, OpWeightCostsCountTheRoutedExpertsAsInt8Macs) {
  auto q = Model::Load(QuantizedTiny());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const Model& base = TestModel("tiny");
  const ModelConfig& c = base.config();
  const int kExp = static_cast<int>(Op::kExperts);
  const OpWeightCost b = OpWeightCosts(base.weights(), {}, c.num_experts_per_tok);
  const OpWeightCost x = OpWeightCosts(q->get()->weights(), {}, c.num_experts_per_tok);
  double routed = 0;  // per row, over the MoE layers
  for (const TensorSpec& s : ExpectedTensors(c)) {
    if (s.routed_expert && s.layer < c.num_hidden_layers &&
        s.name.find(".experts.0.") != std::string::npos) {
      routed += static_cast<double>(c.num_experts_per_tok) * static_cast<double>(s.numel());
    }
  }
  ASSERT_GT(routed, 0);
  for (int i = 0; i < static_cast<int>(Op::kCount); ++i) {
    EXPECT_EQ(b.int8_macs_per_row[i], 0.0) << kOpNames[i];
    EXPECT_EQ(x.macs_per_row[i], b.macs_per_row[i]) << kOpNames[i];
    EXPECT_EQ(x.int8_macs_per_row[i], i == kExp ? routed : 0.0) << kOpNames[i];
  }
  EXPECT_GT(x.macs_per_row[kExp], routed);  // the shared expert's bf16 MACs
}

}  // namespace
}  // namespace mx
