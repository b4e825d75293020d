// The checkpoint quantizer on the committed tiny checkpoint and on small synthetic ones:
// layout, bit-exact data, config and exclude list, sharding, copied files, and clean failures
// that leave nothing behind.
#include "quant/quantizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/numerics.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"

namespace mx::quant {
namespace {

namespace fs = std::filesystem;

class QuantizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            fmt::format("mx_quantizer_{}_{}", ::getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // Only the tmp-dir guard may create siblings of the output: after a failure, root_ holds
  // exactly `n` entries.
  size_t Entries() const {
    return std::distance(fs::directory_iterator(root_), fs::directory_iterator());
  }
  // A one-layer synthetic checkpoint with one expert weight of the given dtype and shape.
  std::string Synthetic(DType dt, int64_t n, int64_t k, float poison = 0.0f) {
    const fs::path d = root_ / "in";
    fs::create_directories(d);
    std::ofstream(d / "config.json") << R"({"num_hidden_layers": 1})";
    SafetensorsWriter w;
    std::vector<uint8_t> bytes(n * k * DTypeSize(dt), 0x3c);
    if (poison != 0.0f && dt == DType::kF32) std::memcpy(bytes.data() + 4 * (k + 3), &poison, 4);
    EXPECT_TRUE(w.AddOwned("model.layers.0.mlp.experts.0.up_proj.weight", dt, {n, k}, bytes).ok());
    EXPECT_TRUE(w.Write(d.string()).ok());
    return d.string();
  }
  fs::path root_;
};

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

TEST_F(QuantizerTest, TinyCheckpointLayoutConfigAndData) {
  const std::string out = (root_ / "q").string();
  QuantizeOptions o;
  o.threads = 2;
  int calls = 0;
  o.progress = [&](const QuantizeProgress& p) {
    ++calls;
    EXPECT_LE(p.bytes_done, p.bytes_total);
  };
  auto r = QuantizeCheckpoint(kTiny, out, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // tiny: layers 1..3 and the MTP layer 4 are MoE with 8 experts × 3 projections.
  EXPECT_EQ(r->n_quantized, 4 * 8 * 3);
  EXPECT_GT(calls, 0);
  auto in = Checkpoint::Open(kTiny);
  auto q = Checkpoint::Open(out);
  ASSERT_TRUE(in.ok() && q.ok());
  const std::string e = "model.layers.2.mlp.experts.5.down_proj.";
  const TensorView* src = in->Find(e + "weight");
  const TensorView* data = q->Find(e + "weight");
  const TensorView* scale = q->Find(e + "weight_scale");
  ASSERT_TRUE(src && data && scale);
  EXPECT_EQ(data->dtype, DType::kU8);
  EXPECT_EQ(data->shape, (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(scale->dtype, DType::kU8);
  EXPECT_EQ(scale->shape, (std::vector<int64_t>{64, 1}));
  std::vector<uint16_t> row(32);
  std::vector<uint8_t> p(16), s(1);
  for (int64_t r0 = 0; r0 < 64; ++r0) {
    std::memcpy(row.data(), src->data + r0 * 64, 64);
    ASSERT_TRUE(QuantizeRowBf16(row.data(), 32, ScaleMode::kEven, p.data(), s.data()).ok());
    ASSERT_EQ(0, std::memcmp(p.data(), data->data + r0 * 16, 16)) << r0;
    ASSERT_EQ(s[0], scale->data[r0]) << r0;
  }
  // Unquantized tensors are byte-identical.
  for (const char* name : {"model.layers.4.mlp.shared_experts.up_proj.weight", "lm_head.weight",
                           "model.layers.1.self_attn.q_b_proj.weight", "model.norm.weight"}) {
    const TensorView* a = in->Find(name);
    const TensorView* b = q->Find(name);
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(a->dtype, b->dtype);
    EXPECT_EQ(a->shape, b->shape);
    EXPECT_EQ(0, std::memcmp(a->data, b->data, a->nbytes)) << name;
  }
  std::ifstream cf(out + "/config.json");
  const auto cfg = nlohmann::json::parse(cf);
  const auto& qc = cfg["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "quark");
  EXPECT_EQ(qc["global_quant_config"]["weight"]["scale_calculation_mode"], "even");
  const std::vector<std::string> ex = qc["exclude"];
  auto has = [&](const std::string& n) { return std::find(ex.begin(), ex.end(), n) != ex.end(); };
  for (const char* n :
       {"lm_head", "model.embed_tokens", "model.layers.4.mlp.shared_experts.gate_proj",
        "model.layers.4.eh_proj", "model.layers.0.mlp.down_proj",
        "model.layers.3.self_attn.indexer.weights_proj", "model.layers.1.mlp.gate"}) {
    EXPECT_TRUE(has(n)) << n;
  }
  EXPECT_FALSE(has("model.layers.1.mlp.experts.0.gate_proj"));
  EXPECT_EQ(cfg["hidden_size"], 64);  // the rest of config.json is kept
  EXPECT_TRUE(fs::exists(out + "/tokenizer.json"));
  EXPECT_TRUE(fs::exists(out + "/generation_config.json"));
  EXPECT_TRUE(fs::exists(out + "/tokenizer_config.json"));
  EXPECT_EQ(Entries(), 1u);  // no temporary left beside it
}

TEST_F(QuantizerTest, ShardsAboveTheLimitAndHonoursPatterns) {
  const std::string out = (root_ / "q").string();
  QuantizeOptions o;
  o.max_shard_bytes = 100'000;
  o.scale_mode = ScaleMode::kFloor;
  o.exclude = {"re:.*experts\\.0\\."};
  o.include = {"*q_a_proj"};
  auto r = QuantizeCheckpoint(kTiny, out, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->num_shards, 1);
  EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
  auto q = Checkpoint::Open(out);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->Find("model.layers.1.mlp.experts.0.up_proj.weight")->dtype, DType::kBF16);
  EXPECT_EQ(q->Find("model.layers.1.mlp.experts.1.up_proj.weight")->dtype, DType::kU8);
  EXPECT_EQ(q->Find("model.layers.1.self_attn.q_a_proj.weight")->dtype, DType::kU8);
  EXPECT_EQ(r->n_quantized, 4 * 7 * 3 + 5);
}

TEST_F(QuantizerTest, ExistingOutputIsRefusedUnlessOverwrite) {
  const fs::path out = root_ / "q";
  fs::create_directories(out);
  std::ofstream(out / "keep.txt") << "x";
  auto r = QuantizeCheckpoint(kTiny, out.string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs::exists(out / "keep.txt"));
  QuantizeOptions o;
  o.overwrite = true;
  ASSERT_TRUE(QuantizeCheckpoint(kTiny, out.string(), o).ok());
  EXPECT_FALSE(fs::exists(out / "keep.txt"));
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
}

TEST_F(QuantizerTest, BadInputsFailAndLeaveNothing) {
  struct Bad {
    DType dt;
    int64_t n, k;
    float poison;
    const char* want;
  };
  for (const Bad& b : {Bad{DType::kBF16, 4, 48, 0, "not divisible by 32"},
                       Bad{DType::kF16, 4, 64, 0, "dtype F16 cannot be quantized"},
                       Bad{DType::kF32, 4, 64, NAN, "row 1: non-finite value nan at column 3"},
                       Bad{DType::kF32, 4, 64, INFINITY, "column 3"}}) {
    fs::remove_all(root_);
    fs::create_directories(root_);
    const std::string in = Synthetic(b.dt, b.n, b.k, b.poison);
    auto r = QuantizeCheckpoint(in, (root_ / "q").string(), {});
    ASSERT_FALSE(r.ok()) << b.want;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("model.layers.0.mlp.experts.0.up_proj.weight"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(b.want), std::string::npos) << r.status().message();
    EXPECT_EQ(Entries(), 1u) << b.want;  // only the input
  }
}

TEST(ByteSize, Parses) {
  EXPECT_EQ(*ParseByteSize("5GB"), 5'000'000'000u);
  EXPECT_EQ(*ParseByteSize("500MB"), 500'000'000u);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("1.5kb"), 1500u);
  EXPECT_EQ(*ParseByteSize("123"), 123u);
  EXPECT_FALSE(ParseByteSize("five").ok());
  EXPECT_FALSE(ParseByteSize("0").ok());
  // Malformed or absurd input is an error, never an exception or an overflow.
  EXPECT_FALSE(ParseByteSize("99999999999999999999999999TB").ok());
  EXPECT_FALSE(ParseByteSize("1234567890123456789012345678901234567890").ok());
  EXPECT_FALSE(ParseByteSize("\xff"
                             "5GB")
                   .ok());
  EXPECT_FALSE(ParseByteSize("").ok());
}

}  // namespace
}  // namespace mx::quant
