// Tuned MoE config files: shape specs, round trip, malformed files rejected with file + field,
// bucket choice, lookup order (shipped, then the user directory) and the one-time warning.
#include "tune/moe_tuning.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "io/safetensors_test_util.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

MoeTuneTable SampleTable() {
  MoeTuneTable t;
  t.dtype = "bf16";
  t.isa = "avx2";
  t.shape = {64, 32, 4, 2, 1};
  t.threads = 2;
  t.experts_allocated = 4;
  t.command = "mxserve tune moe --shape model_dim=64,moe_inter=32,E=4,topk=2 --dtype bf16";
  MoeKernelConfig a;
  a.split = MoeSplit::kBatched;
  a.fuse_gate_up = false;
  a.tiling = {.mr = 2, .nb = 64};
  MoeKernelConfig b;
  b.split = MoeSplit::kExperts;
  b.token_tile = 64;
  t.buckets = {
      {1, DefaultMoeConfig(), 10.0, 10.0, 4}, {8, a, 20.5, 30.5, 24}, {64, b, 80, 120, 48}};
  return t;
}

// Writes `text` to `name` in this process's temp dir (removed at exit) and returns its path.
std::string WriteTemp(const std::string& name, const std::string& text) {
  static const fs::path dir = testing_util::FreshTempDir("moe_tuning");
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(MoeShape, ParsesSpecAndNamesIt) {
  auto s = ParseMoeShape("model_dim=6144,moe_inter=2048,E=256,topk=8");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, (MoeShape{6144, 2048, 256, 8, 1}));
  EXPECT_EQ(MoeShapeName(*s), "d6144-f2048-e256-k8-s1");
  EXPECT_EQ(MoeTuneFileName("mxfp4", *s, "avx512"), "mxfp4-d6144-f2048-e256-k8-s1-avx512.json");
  auto back = ParseMoeShape(MoeShapeSpec(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
  auto hf = ParseMoeShape(
      "hidden_size=8, moe_intermediate_size=4, n_routed_experts=2, "
      "num_experts_per_tok=1, n_shared_experts=0");
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ(*hf, (MoeShape{8, 4, 2, 1, 0}));
}

TEST(MoeShape, RejectsBadSpecsNamingTheKey) {
  auto missing = ParseMoeShape("model_dim=64,moe_inter=32,E=4");
  EXPECT_NE(missing.status().message().find("topk is missing"), std::string::npos)
      << missing.status().ToString();
  auto bad = ParseMoeShape("model_dim=64,moe_inter=x,E=4,topk=2");
  EXPECT_NE(bad.status().message().find("moe_inter=x"), std::string::npos);
  auto unknown = ParseMoeShape("model_dim=64,moe_inter=32,E=4,topk=2,foo=1");
  EXPECT_NE(unknown.status().message().find("unknown key 'foo'"), std::string::npos);
  auto big_k = ParseMoeShape("model_dim=64,moe_inter=32,E=4,topk=5");
  EXPECT_NE(big_k.status().message().find("topk 5 exceeds E 4"), std::string::npos);
  EXPECT_FALSE(ParseMoeShape("model_dim=64,moe_inter=32,E=4,topk").ok());
}

TEST(MoeTuneTable, RoundTripsThroughJson) {
  const MoeTuneTable t = SampleTable();
  auto back = ParseMoeTuneTable(SerializeMoeTuneTable(t), "x.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shape, t.shape);
  EXPECT_EQ(back->dtype, "bf16");
  EXPECT_EQ(back->isa, "avx2");
  EXPECT_EQ(back->command, t.command);
  ASSERT_EQ(back->buckets.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->buckets[i].tokens, t.buckets[i].tokens);
    EXPECT_EQ(back->buckets[i].best, t.buckets[i].best) << i;
    EXPECT_DOUBLE_EQ(back->buckets[i].best_us, t.buckets[i].best_us);
    EXPECT_DOUBLE_EQ(back->buckets[i].default_us, t.buckets[i].default_us);
    EXPECT_EQ(back->buckets[i].candidates, t.buckets[i].candidates);
  }
}

TEST(MoeTuneTable, PicksTheNearestBucketOnALogScale) {
  const MoeTuneTable t = SampleTable();  // buckets 1, 8, 64
  EXPECT_EQ(t.For(1), t.buckets[0].best);
  EXPECT_EQ(t.For(2), t.buckets[0].best);  // |log 2 - log 1| < |log 2 - log 8|
  EXPECT_EQ(t.For(3), t.buckets[1].best);  // 3 is nearer 8 than 1 in log terms
  EXPECT_EQ(t.For(8), t.buckets[1].best);
  EXPECT_EQ(t.For(22), t.buckets[1].best);  // below sqrt(8·64) ≈ 22.6
  EXPECT_EQ(t.For(23), t.buckets[2].best);
  EXPECT_EQ(t.For(100000), t.buckets[2].best);
  EXPECT_EQ(t.For(0), t.buckets[0].best);
}

// Each malformed file names the file and the field.
TEST(MoeTuneTable, RejectsMalformedFilesNamingFileAndField) {
  const std::string good = SerializeMoeTuneTable(SampleTable());
  struct Case {
    std::string from, to;  // textual edit of the good file
    std::string want;      // expected in the message after "f.json: "
  };
  const std::vector<Case> cases = {
      {"\"split\": \"batched\"", "\"split\": \"diagonal\"", "buckets[1].best.split: 'diagonal'"},
      {"\"mr\": 2", "\"mr\": 3", "buckets[1].best.mr: 3 is not 0, 1, 2 or 4"},
      {"\"mr\": 2", "\"mr\": \"2\"", "buckets[1].best.mr: expected an integer"},
      {"\"fuse_gate_up\": false,\n        \"mr\": 2", "\"mr\": 2",
       "buckets[1].best.fuse_gate_up: missing"},
      {"\"tokens\": 8", "\"tokens\": 1", "buckets[1].tokens: 1 does not ascend"},
      {"\"best_us\": 20.5", "\"best_us\": -1",
       "buckets[1].best_us: expected a non-negative number"},
      {"\"model_dim\": 64", "\"model_dim\": 0", "shape.model_dim: 0 is outside"},
      {"\"version\": 1", "\"version\": 2", "version: 2 is not supported"},
      {"\"format\": \"mxserve-moe-tune\"", "\"format\": \"other\"", "format: 'other'"},
      {"\"dtype\": \"bf16\"", "\"dtype\": \"int4\"",
       "dtype: 'int4' is not bf16, mxfp4, fp8 or f32"},
      {"\"isa\": \"avx2\"", "\"isa\": \"neon\"", "isa: 'neon'"},
      {"\"threads\": 2,", "", "threads: missing"},
  };
  for (const Case& c : cases) {
    std::string text = good;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    auto r = ParseMoeTuneTable(text, "f.json");
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find("f.json: " + c.want), std::string::npos)
        << "got: " << r.status().message() << "\nwant: " << c.want;
  }
  auto not_json = ParseMoeTuneTable("{\"format\": ", "g.json");
  EXPECT_NE(not_json.status().message().find("g.json: not valid JSON"), std::string::npos);
  auto no_buckets =
      ParseMoeTuneTable(good.substr(0, good.find("\"buckets\"")) + "\"buckets\": []}", "h.json");
  EXPECT_NE(no_buckets.status().message().find("h.json: buckets: expected a non-empty array"),
            std::string::npos)
      << no_buckets.status().message();
}

// Captures what spdlog's default logger writes while alive.
class LogCapture {
 public:
  LogCapture() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%l %v");
    saved_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(saved_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> saved_;
};

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(MoeTuning, UntunedShapeSaysOnceWithTheTuneCommand) {
  const MoeShape odd{136, 72, 6, 3, 1};  // no config anywhere
  LogCapture log;
  auto r = ResolveMoeTuning(odd, "bf16", "avx2", "/nonexistent/dir");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->tuned);
  EXPECT_STREQ(r->state(), "default");
  EXPECT_EQ(r->For(7), DefaultMoeConfig());
  EXPECT_EQ(r->command,
            "mxserve tune moe --shape model_dim=136,moe_inter=72,E=6,topk=3,shared=1 --dtype "
            "bf16 --tokens 1,2,4,8,16,32,64,128,256,512 --output-dir /nonexistent/dir");
  EXPECT_EQ(log.text(), "");  // looking up logs nothing; the loader says it once
  LogMoeTuning(*r);
  const std::string text = log.text();
  EXPECT_EQ(Count(text, "warning "), 1) << text;
  EXPECT_EQ(Count(text, "no tuned config for bf16 model_dim=136,moe_inter=72,E=6,topk=3,shared=1"),
            1)
      << text;
  EXPECT_EQ(Count(text, "not in configs/moe (built in) or /nonexistent/dir"), 1) << text;
  EXPECT_EQ(Count(text, "Tune it with: mxserve tune moe --shape model_dim=136"), 1) << text;
}

TEST(MoeTuning, FindsAUserConfigAndRejectsAMismatchedOne) {
  MoeTuneTable t = SampleTable();
  t.shape = {72, 40, 5, 2, 1};
  const std::string name = MoeTuneFileName("bf16", t.shape, "avx2");
  const std::string path = WriteTemp(name, SerializeMoeTuneTable(t));
  const std::string dir = fs::path(path).parent_path().string();
  LogCapture log;
  auto r = ResolveMoeTuning(t.shape, "bf16", "avx2", dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->tuned);
  EXPECT_STREQ(r->state(), "tuned");
  EXPECT_EQ(r->file, path);
  EXPECT_EQ(r->For(8), t.buckets[1].best);
  ForwardBatch eight;
  eight.seqs.push_back({0, 0, std::vector<int32_t>(5, 1), {}});
  eight.seqs.push_back({1, 9, std::vector<int32_t>(3, 1), {}});
  EXPECT_EQ(r->For(eight), t.buckets[1].best);  // all rows of the forward
  LogMoeTuning(*r);
  EXPECT_EQ(Count(log.text(), "warning "), 0);
  EXPECT_EQ(Count(log.text(), "MoE kernels: tuned config " + path), 1) << log.text();

  // A file under the right name that describes another shape is an error, not a silent use.
  MoeTuneTable other = t;
  other.shape.model_dim = 80;
  WriteTemp(name, SerializeMoeTuneTable(other));
  auto bad = ResolveMoeTuning(t.shape, "bf16", "avx2", dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ": shape: model_dim=80"), std::string::npos)
      << bad.status().message();
  // And a malformed one names the file and field.
  WriteTemp(name, "{\"format\": \"mxserve-moe-tune\", \"version\": 1}");
  auto broken = ResolveMoeTuning(t.shape, "bf16", "avx2", dir);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(path + ": dtype: missing"), std::string::npos)
      << broken.status().message();
}

TEST(MoeTuning, ModelWithoutMoeNeedsNoConfig) {
  LogCapture log;
  auto r = ResolveMoeTuning({}, "", "avx2", "", /*has_moe=*/false);
  ASSERT_TRUE(r.ok());
  EXPECT_STREQ(r->state(), "none");
  EXPECT_EQ(log.text(), "");
}

// The binary carries exactly the configs committed under configs/moe/, they parse, and each is
// found by its own name.
TEST(MoeTuning, ShippedConfigsAreBuiltInAndParse) {
  std::map<std::string, std::string> on_disk;
  for (const auto& e : fs::directory_iterator(fs::path(MX_SOURCE_DIR) / "configs" / "moe")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    on_disk[e.path().filename().string()] = ss.str();
  }
  ASSERT_GE(on_disk.size(), 1u);
  ASSERT_EQ(ShippedMoeConfigs().size(), on_disk.size());
  for (const ShippedMoeConfig& f : ShippedMoeConfigs()) {
    const std::string name(f.name);
    ASSERT_TRUE(on_disk.count(name)) << name;
    EXPECT_EQ(f.text, on_disk[name]) << name;
    auto t = ParseMoeTuneTable(f.text, name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(MoeTuneFileName(t->dtype, t->shape, t->isa), name);
    auto r = ResolveMoeTuning(t->shape, t->dtype, t->isa, "");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->tuned);
    EXPECT_EQ(r->file, std::string(kShippedMoeConfigs) + "/" + name);
  }
}

}  // namespace
}  // namespace mx
