// FP8 KV-cache scales read from a checkpoint: every accepted name, k/v folded to the larger,
// the MTP layer defaulting to 1.0 with a warning, and clear errors for partial sets, bad values,
// shapes and dtypes; the loader accepts scale tensors (not "unexpected"). The engine's use of
// them: src/engine/engine_test.cpp (KvScalesFromTheCheckpoint).
#include "model/kv_scales.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/numerics.h"
#include "io/safetensors_writer.h"
#include "model/model.h"

namespace mx::kv_scales_test {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

struct Scale {
  std::string name;
  float value;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape = {};
};

std::vector<uint8_t> Bytes(const Scale& s) {
  if (s.dtype == DType::kF32) {
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &s.value, 4);
    return b;
  }
  if (s.dtype == DType::kBF16) {
    const uint16_t h = F32ToBf16(s.value);
    return {static_cast<uint8_t>(h & 0xff), static_cast<uint8_t>(h >> 8)};
  }
  return std::vector<uint8_t>(4, 0);  // I32 0: a wrong dtype
}

// A copy of the tiny checkpoint with `scales` in a second safetensors file.
std::string WithScales(const std::string& name, const std::vector<Scale>& scales) {
  const fs::path dir = fs::path(testing::TempDir()) / ("kv_scales_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json"}) {
    fs::copy_file(fs::path(kTiny) / f, dir / f);
  }
  // Two files without an index (model.safetensors alone would hide the second).
  fs::copy_file(fs::path(kTiny) / "model.safetensors", dir / "model-1.safetensors");
  if (!scales.empty()) {
    SafetensorsWriter w;
    for (const Scale& s : scales) {
      EXPECT_TRUE(w.AddOwned(s.name, s.dtype, s.shape, Bytes(s)).ok()) << s.name;
    }
    EXPECT_TRUE(w.WriteFile((dir / "model-2.safetensors").string()).ok());
  }
  return dir.string();
}

ModelConfig TinyConfig() {
  auto c = LoadModelConfig(kTiny + "/config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

std::string Attn(int layer, const std::string& what) {
  return "model.layers." + std::to_string(layer) + ".self_attn." + what;
}

Result<std::vector<float>> Load(const std::string& dir, std::string* warning = nullptr) {
  auto ck = Checkpoint::Open(dir);
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  return LoadKvScales(*ck, TinyConfig(), warning);
}

TEST(KvScales, EveryNameAndKvFoldedToTheLarger) {
  const ModelConfig c = TinyConfig();
  ASSERT_GE(c.num_hidden_layers, 2);
  const int L = static_cast<int>(c.num_hidden_layers);
  const char* names[] = {"attn.k_scale", "k_scale", "attn.kv_scale", "kv_scale",
                         "kv_a_proj_with_mqa.output_scale"};
  std::vector<Scale> s;
  std::vector<float> want;
  for (int l = 0; l <= L; ++l) {
    const float v = 0.25f * static_cast<float>(l + 1);
    s.push_back({Attn(l, names[l % 5]), v, l % 2 ? DType::kBF16 : DType::kF32,
                 l % 3 ? std::vector<int64_t>{1} : std::vector<int64_t>{}});
    want.push_back(v);
  }
  s.push_back({Attn(0, "attn.v_scale"), 3.0f});  // larger than layer 0's k scale
  s.push_back({Attn(1, "v_scale"), 0.125f});     // smaller than layer 1's
  want[0] = 3.0f;
  std::string warning;
  auto got = Load(WithScales("names", s), &warning);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(warning.empty());
  // The loader takes them as scales, not unexpected tensors, and keeps them.
  auto m = Model::Load(WithScales("names", s));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->kv_scales(), want);
  EXPECT_FALSE(IsKvScaleTensor(Attn(L + 1, "k_scale"), c));  // past the MTP layer
  EXPECT_FALSE(IsKvScaleTensor(Attn(0, "q_scale"), c));
}

TEST(KvScales, NoneMtpMissingAndErrors) {
  const ModelConfig c = TinyConfig();
  const int L = static_cast<int>(c.num_hidden_layers);
  auto none = Load(WithScales("none", {}));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  std::vector<Scale> main;
  for (int l = 0; l < L; ++l) main.push_back({Attn(l, "k_scale"), 0.5f});
  std::string warning;
  auto no_mtp = Load(WithScales("no_mtp", main), &warning);
  ASSERT_TRUE(no_mtp.ok()) << no_mtp.status().ToString();
  ASSERT_EQ(no_mtp->size(), static_cast<size_t>(L + 1));
  EXPECT_EQ(no_mtp->back(), 1.0f);
  EXPECT_NE(warning.find("MTP layer"), std::string::npos) << warning;

  auto expect_error = [&](const std::string& name, std::vector<Scale> s,
                          const std::string& needle) {
    auto r = Load(WithScales(name, s));
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    // The model refuses to load too, naming the directory.
    auto m = Model::Load(WithScales(name, s));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().ToString().find(needle), std::string::npos);
  };
  std::vector<Scale> partial(main.begin(), main.end() - 1);
  expect_error("partial", partial, "do not (a partial export?)");
  expect_error("only_mtp", {{Attn(L, "k_scale"), 1.0f}}, "only the MTP layer");
  auto bad = main;
  bad[1].value = -2.0f;
  expect_error("negative", bad, Attn(1, "k_scale"));
  bad[1].value = std::numeric_limits<float>::quiet_NaN();
  expect_error("nan", bad, "not a finite positive scale");
  expect_error("shape", {{Attn(0, "k_scale"), 1.0f, DType::kF32, {1, 1}}},
               "expected a scalar or shape [1]");
  expect_error("dtype", {{Attn(0, "k_scale"), 1.0f, DType::kI32, {}}}, "expected F32, BF16");
}

}  // namespace
}  // namespace mx::kv_scales_test
