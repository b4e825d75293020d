// Tests for Checkpoint::Open: index, single-file and multi-file layouts, and every way an
// index and its shards can disagree.
#include "io/checkpoint.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "io/safetensors_test_util.h"
#include "io/safetensors_writer.h"

namespace mx {
namespace {

using testing_util::FreshTempDir;
using testing_util::WriteText;

// Writes <dir>/<file> holding F32[1] tensors with the given names.
void WriteShard(const std::string& dir, const std::string& file,
                const std::vector<std::string>& names) {
  SafetensorsWriter w;
  std::vector<uint8_t> four = {0, 0, 128, 63};
  for (const auto& n : names) ASSERT_TRUE(w.Add(n, DType::kF32, {1}, four).ok());
  ASSERT_TRUE(w.WriteFile(dir + "/" + file).ok());
}

std::string Index(const std::string& weight_map_body) {
  return R"({"metadata":{"total_size":8},"weight_map":{)" + weight_map_body + "}}";
}

TEST(Checkpoint, OpensShardedCheckpointThroughIndex) {
  auto dir = FreshTempDir("ck_idx");
  WriteShard(dir, "s1.safetensors", {"a", "b"});
  WriteShard(dir, "s2.safetensors", {"c"});
  WriteText(dir + "/model.safetensors.index.json",
            Index(R"("a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors")"));
  auto ck = Checkpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->num_files(), 2);
  EXPECT_EQ(ck->total_bytes(), 12u);
  ASSERT_NE(ck->Find("c"), nullptr);
  EXPECT_EQ(*ck->Find("c")->file, dir + "/s2.safetensors");
  EXPECT_EQ(ck->Find("d"), nullptr);
  // Move keeps views valid.
  Checkpoint moved = std::move(ck).value();
  ASSERT_NE(moved.Find("a"), nullptr);
  EXPECT_EQ(moved.Find("a")->data[3], 63);
}

struct IndexCase {
  const char* label;
  std::string index;
  StatusCode code;
  std::vector<std::string> expect;
};

TEST(Checkpoint, IndexAndShardsMustAgree) {
  std::vector<IndexCase> cases = {
      {"indexed tensor missing from shard",
       Index(R"("a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors",)"
             R"("x":"s1.safetensors")"),
       StatusCode::kDataLoss,
       {"tensor 'x'", "missing from shard", "s1.safetensors"}},
      {"shard tensor not in index",
       Index(R"("a":"s1.safetensors","c":"s2.safetensors")"),
       StatusCode::kDataLoss,
       {"tensor 'b'", "not in the index", "s1.safetensors"}},
      {"tensor in the wrong shard",
       Index(R"("a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors")"),
       StatusCode::kDataLoss,
       {"tensor 'b'", "maps it to s2.safetensors"}},
      {"missing shard file",
       Index(R"("a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors",)"
             R"("d":"s3.safetensors")"),
       StatusCode::kNotFound,
       {"s3.safetensors"}},
      {"invalid json",
       "{\"weight_map\":",
       StatusCode::kDataLoss,
       {"model.safetensors.index.json", "invalid JSON"}},
      {"duplicate key",
       Index(R"("a":"s1.safetensors","a":"s2.safetensors")"),
       StatusCode::kDataLoss,
       {"model.safetensors.index.json", "duplicate key 'a'"}},
      {"no weight_map", R"({"metadata":{}})", StatusCode::kDataLoss, {"missing 'weight_map'"}},
      {"weight_map not object",
       R"({"weight_map":[]})",
       StatusCode::kDataLoss,
       {"'weight_map' must be an object"}},
      {"file not string",
       Index(R"("a":1)"),
       StatusCode::kDataLoss,
       {"tensor 'a'", "must be a file name string"}},
      {"path traversal",
       Index(R"("a":"../s1.safetensors")"),
       StatusCode::kDataLoss,
       {"tensor 'a'", "not a file name in the same directory"}},
      {"not an object", "[]", StatusCode::kDataLoss, {"must be a JSON object"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    auto dir = FreshTempDir("ck_bad");
    WriteShard(dir, "s1.safetensors", {"a", "b"});
    WriteShard(dir, "s2.safetensors", {"c"});
    WriteText(dir + "/model.safetensors.index.json", c.index);
    auto ck = Checkpoint::Open(dir);
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), c.code) << ck.status().ToString();
    for (const auto& s : c.expect) {
      EXPECT_NE(ck.status().message().find(s), std::string::npos)
          << "expected '" << s << "' in: " << ck.status().message();
    }
  }
}

TEST(Checkpoint, MalformedShardNamesFileAndTensor) {
  auto dir = FreshTempDir("ck_badshard");
  WriteShard(dir, "s1.safetensors", {"a"});
  auto bytes = testing_util::RawSafetensors(
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);  // truncated data
  testing_util::WriteBytes(dir + "/s2.safetensors", bytes);
  WriteText(dir + "/model.safetensors.index.json",
            Index(R"("a":"s1.safetensors","w":"s2.safetensors")"));
  auto ck = Checkpoint::Open(dir);
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.status().message().find(dir + "/s2.safetensors"), std::string::npos)
      << ck.status().message();
  EXPECT_NE(ck.status().message().find("tensor 'w'"), std::string::npos);
}

TEST(Checkpoint, SingleFileAndPlainPath) {
  auto dir = FreshTempDir("ck_single");
  WriteShard(dir, "model.safetensors", {"a", "b"});
  WriteShard(dir, "other.safetensors", {"a"});  // ignored: model.safetensors wins
  auto ck = Checkpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->num_files(), 1);
  EXPECT_EQ(ck->tensors().size(), 2u);
  auto one = Checkpoint::Open(dir + "/other.safetensors");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->tensors().size(), 1u);
}

TEST(Checkpoint, SeveralFilesWithoutIndex) {
  auto dir = FreshTempDir("ck_multi");
  WriteShard(dir, "x.safetensors", {"b", "d"});
  WriteShard(dir, "y.safetensors", {"a", "c"});
  WriteText(dir + "/config.json", "{}");
  auto ck = Checkpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->num_files(), 2);
  auto all = ck->tensors();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]->name, "a");
  EXPECT_EQ(all[3]->name, "d");

  WriteShard(dir, "z.safetensors", {"c"});
  auto dup = Checkpoint::Open(dir);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("tensor 'c' also appears in"), std::string::npos)
      << dup.status().message();
  EXPECT_NE(dup.status().message().find("z.safetensors"), std::string::npos);
}

TEST(Checkpoint, EmptyOrMissingDirectoryIsNotFound) {
  auto dir = FreshTempDir("ck_empty");
  auto ck = Checkpoint::Open(dir);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Checkpoint::Open(dir + "/nope").status().code(), StatusCode::kNotFound);
}

TEST(Checkpoint, OpensBundledFixtures) {
  for (const char* name : {"tiny", "tiny-glm52"}) {
    std::string dir = fmt::format("{}/{}", MX_TEST_DATA_DIR, name);
    if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP();
    auto ck = Checkpoint::Open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    EXPECT_GT(ck->tensors().size(), 100u);
    EXPECT_NE(ck->Find("lm_head.weight"), nullptr);
  }
}

TEST(CheckpointIndex, ParsesTotalSizeAndShards) {
  auto idx = ParseCheckpointIndex(
      R"({"metadata":{"total_size":123},"weight_map":{"a":"f2","b":"f1","c":"f2"}})", "i.json");
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_EQ(idx->total_size, 123);
  EXPECT_EQ(idx->shards, (std::vector<std::string>{"f1", "f2"}));
  EXPECT_EQ(idx->weight_map.at("a"), "f2");
}

}  // namespace
}  // namespace mx
