// Shared helpers for the model tests: the committed test checkpoints (loaded once per
// process), fixture files and comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "io/safetensors.h"
#include "model/model.h"
#include "parallel/in_process_communicator.h"
#include "quant/quantizer.h"

namespace mx {

inline std::string TestCheckpointDir(const std::string& name) {
  return std::string(MX_TEST_DATA_DIR) + "/" + name;
}

// The bundled model through `mxserve quantize --format fp8`, made once per process in a
// temporary directory (removed at exit); its fixtures are committed under
// tests/data/<kBundledFp8>/fixtures (tools/make_quantized_fixtures.py --ckpt).
inline const char* const kBundledFp8 = "glm-moe-dsa-arith-6m-fp8";
inline const std::string& BundledFp8Dir() {
  struct Dir {
    std::filesystem::path path;
    ~Dir() { std::filesystem::remove_all(path); }
  };
  static const Dir dir = [] {
    Dir d{std::filesystem::temp_directory_path() /
          ("mx_bundled_fp8_" + std::to_string(::getpid()))};
    quant::QuantizeOptions o;
    o.format = "fp8";
    o.overwrite = true;
    o.threads = 2;
    auto r = quant::QuantizeCheckpoint(std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m",
                                       d.path.string(), o);
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      std::abort();
    }
    return d;
  }();
  static const std::string s = dir.path.string();
  return s;
}

// Where a test checkpoint's weights are: under tests/data, or made at test time.
inline std::string TestModelDir(const std::string& name) {
  return name == kBundledFp8 ? BundledFp8Dir() : TestCheckpointDir(name);
}

// The two checkpoints' model.safetensors hold the same tensors: names, dtypes, shapes, bytes.
inline void ExpectSameTensors(const std::string& dir_a, const std::string& dir_b) {
  auto a = SafetensorsFile::Open(dir_a + "/model.safetensors");
  auto b = SafetensorsFile::Open(dir_b + "/model.safetensors");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size()) << dir_a << " vs " << dir_b;
  for (const TensorView& x : (*b)->tensors()) {
    const TensorView* y = (*a)->Find(x.name);
    ASSERT_NE(y, nullptr) << x.name << " missing from " << dir_a;
    EXPECT_EQ(y->dtype, x.dtype) << x.name;
    EXPECT_EQ(y->shape, x.shape) << x.name;
    ASSERT_EQ(y->nbytes, x.nbytes) << x.name;
    EXPECT_EQ(std::memcmp(y->data, x.data, x.nbytes), 0) << x.name << ": different bytes";
  }
}

// Loaded once; aborts the test binary on a load failure (the committed data is broken).
inline const Model& TestModel(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  auto& m = cache[name];
  if (!m) {
    auto r = Model::Load(TestModelDir(name));
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      std::abort();
    }
    m = std::move(r).value();
  }
  return *m;
}

inline std::unique_ptr<SafetensorsFile> OpenFixture(const std::string& ckpt, int64_t T) {
  auto f = SafetensorsFile::Open(TestCheckpointDir(ckpt) + "/fixtures/prompt_" + std::to_string(T) +
                                 ".safetensors");
  if (!f.ok()) {
    ADD_FAILURE() << f.status().ToString();
    std::abort();
  }
  return std::move(f).value();
}

inline std::vector<float> F32(const SafetensorsFile& f, const std::string& name) {
  const TensorView* t = f.Find(name);
  if (t == nullptr || t->dtype != DType::kF32) {
    ADD_FAILURE() << f.path() << ": no F32 tensor " << name;
    return {};
  }
  std::vector<float> v(t->numel());
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

inline std::vector<int32_t> I32(const SafetensorsFile& f, const std::string& name) {
  const TensorView* t = f.Find(name);
  if (t == nullptr || t->dtype != DType::kI32) {
    ADD_FAILURE() << f.path() << ": no I32 tensor " << name;
    return {};
  }
  std::vector<int32_t> v(t->numel());
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

// Max |a - b|; +inf when sizes differ or any value is NaN (so NaN never passes).
inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double(a[i]) - double(b[i]));
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

inline int32_t ArgMax(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// Loads the `size` shards of `dir` (tensor parallel, or expert parallel with `ep`) and runs
// fn(shard, its communicator) for every rank on its own thread over an in-process group; one
// result per rank (empty when a shard fails to load).
template <typename R>
std::vector<R> RunSharded(const std::string& dir, int size, bool ep,
                          const std::function<R(const Model&, Communicator*)>& fn) {
  std::vector<std::unique_ptr<Model>> shards;
  for (int r = 0; r < size; ++r) {
    auto m = Model::Load(dir, nullptr, ModelShard{r, size, ep});
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return {};
    shards.push_back(std::move(m).value());
  }
  InProcessGroup group(size);
  std::vector<R> runs(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] { runs[r] = fn(*shards[r], &group.rank(r)); });
  }
  for (auto& t : threads) t.join();
  return runs;
}

// How far a forward is from a fixture when choices may flip (bf16 activations, MXFP4
// weights): the largest logit error and scale, mean KL divergence from the reference's
// next-token distribution, top-1 agreement, and the share of indexer top-k and router entries
// that agree.
struct Agreement {
  double e_logits = 0, scale = 0, kld = 0;
  int64_t top1 = 0, same = 0, total = 0, r_same = 0, r_total = 0;
};

inline Agreement Compare(const ModelConfig& c, const ForwardOutput& out, const SafetensorsFile& fx,
                         int64_t T) {
  const int64_t L = c.num_hidden_layers, K = c.index_topk, V = c.vocab_size;
  Agreement a;
  const std::vector<float> want = F32(fx, "logits");
  for (int64_t r = 0; r < T; ++r) {
    const float* p = want.data() + r * V;
    const float* q = out.logits.data() + r * V;
    for (int64_t v = 0; v < V; ++v) a.scale = std::max(a.scale, double{std::fabs(p[v])});
    double mp = -1e30, mq = -1e30, zp = 0, zq = 0;
    for (int64_t v = 0; v < V; ++v)
      mp = std::max<double>(mp, p[v]), mq = std::max<double>(mq, q[v]);
    for (int64_t v = 0; v < V; ++v) zp += std::exp(p[v] - mp), zq += std::exp(q[v] - mq);
    for (int64_t v = 0; v < V; ++v) {
      const double lp = p[v] - mp - std::log(zp), lq = q[v] - mq - std::log(zq);
      a.kld += std::exp(lp) * (lp - lq);
    }
    a.top1 += ArgMax(p, V) == ArgMax(q, V);
  }
  a.kld /= static_cast<double>(T);
  const std::vector<int32_t> topk = I32(fx, "indexer_topk");
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t i = 0; i < T * K; ++i) a.same += out.topk[l][i] == topk[l * T * K + i], ++a.total;
  }
  for (int64_t l = 0; l < L; ++l) {
    if (!c.is_moe_layer(l)) continue;
    const std::vector<int32_t> e = I32(fx, "router_experts." + std::to_string(l));
    for (size_t i = 0; i < e.size(); ++i) {
      a.r_same += out.router.at(l).experts[i] == e[i], ++a.r_total;
    }
  }
  a.e_logits = MaxAbsDiff(out.logits, want);
  return a;
}

}  // namespace mx
