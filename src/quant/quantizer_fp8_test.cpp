// `mxserve quantize --format fp8` against an independent block-FP8 encoder written here (a
// nearest-code search over the e4m3 value table, not the production conversion), the
// HF / DeepSeek layout and quantization_config, the default recipe and --exclude, and
// `--format mxfp4` from an FP8 input: bit for bit the MXFP4 of the dequantized weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "base/numerics.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "quant/quantizer.h"

namespace mx::quant::quantizer_fp8_test {
namespace {

namespace fs = std::filesystem;

// e4m3fn code c (0..0x7e, positive) as a double: subnormals m/8 · 2^-6, normals
// (1 + m/8) · 2^(e-7).
double CodeValue(int c) {
  const int e = c >> 3, m = c & 7;
  return e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
}

// The nearest code to v, ties to the even code, saturating at 448.
uint8_t EncodeIndependently(float v) {
  const double a = std::fabs(double(v));
  int best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const double d = std::fabs(CodeValue(c) - a), db = std::fabs(CodeValue(best) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return static_cast<uint8_t>((std::signbit(v) ? 0x80 : 0) | best);
}

struct Encoded {
  std::vector<uint8_t> codes;  // [n, k]
  std::vector<float> scales;   // [ceil(n/128), ceil(k/128)]
};

// DeepSeek's block cast: scale = amax / 448 per 128 × 128 block (1 for zeros), codes x / scale.
Encoded EncodeTensor(const std::vector<float>& x, int64_t n, int64_t k) {
  const int64_t nb = (n + 127) / 128, kb = (k + 127) / 128;
  Encoded e;
  e.codes.resize(n * k);
  e.scales.resize(nb * kb);
  for (int64_t bi = 0; bi < nb; ++bi) {
    for (int64_t bj = 0; bj < kb; ++bj) {
      float amax = 0;
      for (int64_t r = bi * 128; r < std::min(n, bi * 128 + 128); ++r) {
        for (int64_t t = bj * 128; t < std::min(k, bj * 128 + 128); ++t) {
          amax = std::max(amax, std::fabs(x[r * k + t]));
        }
      }
      const float s = amax > 0 ? amax / 448.0f : 1.0f;
      e.scales[bi * kb + bj] = s;
      for (int64_t r = bi * 128; r < std::min(n, bi * 128 + 128); ++r) {
        for (int64_t t = bj * 128; t < std::min(k, bj * 128 + 128); ++t) {
          e.codes[r * k + t] = EncodeIndependently(x[r * k + t] / s);
        }
      }
    }
  }
  return e;
}

std::vector<float> AsF32(const TensorView& v) {
  std::vector<float> out(v.numel());
  for (int64_t i = 0; i < v.numel(); ++i) {
    if (v.dtype == DType::kBF16) {
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      out[i] = Bf16ToF32(h);
    } else {
      std::memcpy(&out[i], v.data + 4 * i, 4);
    }
  }
  return out;
}

// Writes `c`'s tensors to `dir` (with `config` copied beside them): each through `custom` when
// it returns true (it added its own version or dropped the tensor), else unchanged.
void Rewrite(const Checkpoint& c, const fs::path& config, const fs::path& dir,
             const std::function<bool(const TensorView&, SafetensorsWriter&)>& custom) {
  fs::create_directories(dir);
  fs::copy_file(config, dir / "config.json");
  SafetensorsWriter sw;
  for (const TensorView* v : c.tensors()) {
    if (custom(*v, sw)) continue;
    ASSERT_TRUE(
        sw.AddOwned(v->name, v->dtype, v->shape, std::vector<uint8_t>(v->data, v->data + v->nbytes))
            .ok());
  }
  ASSERT_TRUE(sw.Write(dir.string()).ok());
}

class QuantizerFp8Test : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            fmt::format("mx_quantizer_fp8_{}_{}", ::getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

// Several blocks with partial ones on both edges, a block of zeros, values over many binades.
TEST_F(QuantizerFp8Test, BlocksAreBitExactAgainstAnIndependentEncoder) {
  const int64_t n = 300, k = 260;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> w(n * k);
  for (int64_t i = 0; i < n * k; ++i) {
    const int64_t r = i / k, t = i % k;
    const bool zero_block = r >= 128 && r < 256 && t < 128;
    w[i] = zero_block ? 0 : F32ToBf16(nd(rng) * std::exp2(float(int(rng() % 24)) - 16.0f));
  }
  const fs::path in = root_ / "in";
  fs::create_directories(in);
  std::ofstream(in / "config.json") << R"({"num_hidden_layers": 1, "hidden_size": 260})";
  SafetensorsWriter sw;
  const std::string name = "model.layers.0.self_attn.o_proj.weight";
  std::vector<uint8_t> bytes(n * k * 2);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  ASSERT_TRUE(sw.AddOwned(name, DType::kBF16, {n, k}, bytes).ok());
  ASSERT_TRUE(sw.AddOwned("model.embed_tokens.weight", DType::kBF16, {2, k},
                          std::vector<uint8_t>(2 * k * 2, 0x3c))
                  .ok());
  ASSERT_TRUE(sw.Write(in.string()).ok());
  QuantizeOptions o;
  o.format = "fp8";
  o.threads = 2;
  auto r = QuantizeCheckpoint(in.string(), (root_ / "q").string(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->n_quantized, 1);
  auto q = Checkpoint::Open((root_ / "q").string());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const TensorView* codes = q->Find(name);
  const TensorView* scales = q->Find(name + "_scale_inv");
  ASSERT_TRUE(codes && scales);
  EXPECT_EQ(codes->dtype, DType::kF8_E4M3);
  EXPECT_EQ(codes->shape, (std::vector<int64_t>{n, k}));
  EXPECT_EQ(scales->dtype, DType::kF32);
  EXPECT_EQ(scales->shape, (std::vector<int64_t>{3, 3}));
  std::vector<float> x(n * k);
  for (int64_t i = 0; i < n * k; ++i) x[i] = Bf16ToF32(w[i]);
  const Encoded want = EncodeTensor(x, n, k);
  for (int64_t i = 0; i < n * k; ++i) {
    ASSERT_EQ(codes->data[i], want.codes[i]) << "element " << i / k << ", " << i % k;
  }
  for (int64_t b = 0; b < 9; ++b) {
    float s;
    std::memcpy(&s, scales->data + 4 * b, 4);
    ASSERT_EQ(s, want.scales[b]) << "block " << b;
  }
  EXPECT_EQ(q->Find("model.embed_tokens.weight")->dtype, DType::kBF16);
  EXPECT_EQ(q->Find("model.embed_tokens.weight_scale_inv"), nullptr);
  std::ifstream cf(root_ / "q" / "config.json");
  const auto cfg = nlohmann::json::parse(cf);
  EXPECT_EQ(cfg["quantization_config"],
            nlohmann::json::parse(R"({"activation_scheme": "dynamic", "fmt": "e4m3",
                                      "quant_method": "fp8", "weight_block_size": [128, 128]})"));
  EXPECT_EQ(cfg["hidden_size"], 260);
}

// The tiny model: every matrix FP8 but the embedding, lm_head, the routers, the indexer's
// weights_proj and the MTP eh_proj; --exclude keeps more in bf16 and lists them.
TEST_F(QuantizerFp8Test, TinyDefaultRecipeAndExclude) {
  QuantizeOptions o;
  o.format = "fp8";
  o.exclude = {"re:.*experts\\.3\\..*"};
  auto r = QuantizeCheckpoint(kTiny, (root_ / "q").string(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto in = Checkpoint::Open(kTiny);
  auto q = Checkpoint::Open((root_ / "q").string());
  ASSERT_TRUE(in.ok() && q.ok());
  for (const char* kept :
       {"model.embed_tokens.weight", "lm_head.weight", "model.layers.1.mlp.gate.weight",
        "model.layers.3.self_attn.indexer.weights_proj.weight", "model.layers.4.eh_proj.weight",
        "model.layers.2.mlp.experts.3.up_proj.weight", "model.norm.weight"}) {
    const TensorView* a = in->Find(kept);
    const TensorView* b = q->Find(kept);
    ASSERT_TRUE(a && b) << kept;
    EXPECT_EQ(b->dtype, a->dtype) << kept;
    EXPECT_EQ(0, std::memcmp(a->data, b->data, a->nbytes)) << kept;
  }
  for (const char* name :
       {"model.layers.0.mlp.down_proj.weight", "model.layers.1.self_attn.kv_b_proj.weight",
        "model.layers.2.mlp.experts.5.up_proj.weight", "model.layers.3.self_attn.indexer.wk.weight",
        "model.layers.4.mlp.shared_experts.gate_proj.weight"}) {
    const TensorView* a = in->Find(name);
    const TensorView* c = q->Find(name);
    const TensorView* s = q->Find(std::string(name) + "_scale_inv");
    ASSERT_TRUE(a && c && s) << name;
    EXPECT_EQ(c->dtype, DType::kF8_E4M3);
    EXPECT_EQ(s->shape,
              (std::vector<int64_t>{(a->shape[0] + 127) / 128, (a->shape[1] + 127) / 128}));
    const Encoded want = EncodeTensor(AsF32(*a), a->shape[0], a->shape[1]);
    EXPECT_EQ(0, std::memcmp(c->data, want.codes.data(), c->nbytes)) << name;
    EXPECT_EQ(0, std::memcmp(s->data, want.scales.data(), s->nbytes)) << name;
  }
  std::ifstream cf(root_ / "q" / "config.json");
  const auto qc = nlohmann::json::parse(cf)["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "fp8");
  const std::vector<std::string> ignored = qc["ignored_layers"];
  EXPECT_EQ(ignored.size(), 4u * 3);  // experts.3 of the 4 MoE layers (MTP included)
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "model.layers.4.mlp.experts.3.down_proj"),
            ignored.end());
}

// FP8 → MXFP4 is the MXFP4 of the dequantized (fp32) weights, bit for bit; the weights the
// MXFP4 recipe leaves alone stay FP8 with their scales (a mixed checkpoint) and are excluded.
TEST_F(QuantizerFp8Test, Fp8ToMxfp4EqualsMxfp4OfTheDequantizedWeights) {
  QuantizeOptions f8;
  f8.format = "fp8";
  const std::string q8 = (root_ / "q8").string(), m1 = (root_ / "m1").string();
  ASSERT_TRUE(QuantizeCheckpoint(kTiny, q8, f8).ok());
  auto r = QuantizeCheckpoint(q8, m1, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The same checkpoint with every FP8 weight dequantized here to f32, then quantized.
  auto c8 = Checkpoint::Open(q8);
  ASSERT_TRUE(c8.ok());
  const fs::path deq = root_ / "deq";
  Rewrite(*c8, fs::path(kTiny) / "config.json", deq,
          [&](const TensorView& v, SafetensorsWriter& sw) {
            if (v.name.ends_with("_scale_inv")) return true;
            if (v.dtype != DType::kF8_E4M3) return false;
            const TensorView* s = c8->Find(v.name + "_scale_inv");
            const int64_t n = v.shape[0], k = v.shape[1], kb = (k + 127) / 128;
            std::vector<uint8_t> out(n * k * 4);
            for (int64_t i = 0; i < n * k; ++i) {
              float sc;
              std::memcpy(&sc, s->data + 4 * ((i / k) / 128 * kb + (i % k) / 128), 4);
              const float d =
                  float(CodeValue(v.data[i] & 0x7f)) * (v.data[i] & 0x80 ? -1.0f : 1.0f) * sc;
              std::memcpy(out.data() + 4 * i, &d, 4);
            }
            EXPECT_TRUE(sw.AddOwned(v.name, DType::kF32, v.shape, std::move(out)).ok());
            return true;
          });
  const std::string m2 = (root_ / "m2").string();
  ASSERT_TRUE(QuantizeCheckpoint(deq.string(), m2, {}).ok());
  auto a = Checkpoint::Open(m1);
  auto b = Checkpoint::Open(m2);
  ASSERT_TRUE(a.ok() && b.ok());
  int compared = 0;
  for (const TensorView* v : a->tensors()) {
    if (v->dtype != DType::kU8) continue;  // MXFP4 codes and E8M0 scales
    const TensorView* w = b->Find(v->name);
    ASSERT_TRUE(w != nullptr) << v->name;
    ASSERT_EQ(v->shape, w->shape) << v->name;
    ASSERT_EQ(0, std::memcmp(v->data, w->data, v->nbytes)) << v->name;
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 4 * 8 * 3);
  // Non-expert weights stay FP8 with their scales; the experts' FP8 scales are gone.
  EXPECT_EQ(a->Find("model.layers.1.self_attn.q_b_proj.weight")->dtype, DType::kF8_E4M3);
  EXPECT_NE(a->Find("model.layers.1.self_attn.q_b_proj.weight_scale_inv"), nullptr);
  EXPECT_EQ(a->Find("model.layers.1.mlp.experts.0.up_proj.weight_scale_inv"), nullptr);
  std::ifstream cf(fs::path(m1) / "config.json");
  const auto qc = nlohmann::json::parse(cf)["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "quark");
  const std::vector<std::string> ex = qc["exclude"];
  EXPECT_NE(std::find(ex.begin(), ex.end(), "model.layers.1.self_attn.q_b_proj"), ex.end());
}

TEST_F(QuantizerFp8Test, RefusesFp8ToFp8AndAnFp8WeightWithoutItsScale) {
  QuantizeOptions f8;
  f8.format = "fp8";
  const std::string q8 = (root_ / "q8").string();
  ASSERT_TRUE(QuantizeCheckpoint(kTiny, q8, f8).ok());
  auto again = QuantizeCheckpoint(q8, (root_ / "x").string(), f8);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already quantized to fp8"), std::string::npos);
  // Drop two experts' scales: one error names both.
  auto c8 = Checkpoint::Open(q8);
  ASSERT_TRUE(c8.ok());
  const fs::path bad = root_ / "bad";
  Rewrite(*c8, fs::path(q8) / "config.json", bad, [](const TensorView& v, SafetensorsWriter&) {
    return v.name == "model.layers.1.mlp.experts.2.up_proj.weight_scale_inv" ||
           v.name == "model.layers.3.mlp.experts.7.down_proj.weight_scale_inv";
  });
  auto r = QuantizeCheckpoint(bad.string(), (root_ / "m").string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2 tensor(s)"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("layers.1.mlp.experts.2.up_proj.weight"), std::string::npos);
  EXPECT_NE(r.status().message().find("layers.3.mlp.experts.7.down_proj.weight"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "m"));
}

}  // namespace
}  // namespace mx::quant::quantizer_fp8_test
