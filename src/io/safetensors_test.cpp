// Tests for ParseSafetensorsHeader and SafetensorsFile: valid files, every malformed case
// (checking that the message names the file and tensor), random mutations, and replay of
// the fuzz regression corpus.
#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "io/safetensors_test_util.h"
#include "io/safetensors_writer.h"

namespace mx::safetensors_test {
namespace {

using testing_util::RawSafetensors;

Status ParseStatus(const std::vector<uint8_t>& bytes) {
  auto r = ParseSafetensorsHeader(bytes.data(), bytes.size(), "bad.safetensors");
  return r.ok() ? Status::Ok() : r.status();
}

TEST(SafetensorsHeader, ParsesValidHeader) {
  auto bytes = RawSafetensors(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[2,10]},)"
      R"("a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"e":{"dtype":"I8","shape":[0,3],)"
      R"("data_offsets":[10,10]},"s":{"dtype":"F64","shape":[],"data_offsets":[10,18]}}  )",
      18);
  auto r = ParseSafetensorsHeader(bytes.data(), bytes.size(), "ok.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tensors.size(), 4u);
  // File order: by offset.
  EXPECT_EQ(r->tensors[0].name, "a");
  EXPECT_EQ(r->tensors[1].name, "b");
  EXPECT_EQ(r->tensors[1].dtype, DType::kF32);
  EXPECT_EQ(r->tensors[1].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(r->tensors[3].name, "s");
  EXPECT_TRUE(r->tensors[3].shape.empty());  // a scalar
  EXPECT_EQ(r->metadata.at("format"), "pt");
  EXPECT_EQ(r->data_start, bytes.size() - 18);
}

TEST(SafetensorsHeader, EmptyHeaderObjectIsValid) {
  auto bytes = RawSafetensors("{}", 0);
  auto r = ParseSafetensorsHeader(bytes.data(), bytes.size(), "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->tensors.empty());
}

struct BadCase {
  const char* label;
  std::vector<uint8_t> bytes;
  std::vector<std::string> expect;  // substrings of the message
};

std::vector<uint8_t> WithLength(uint64_t n, size_t total) {
  std::vector<uint8_t> v(total, ' ');
  for (int i = 0; i < 8; ++i) v[i] = static_cast<uint8_t>(n >> (8 * i));
  return v;
}

std::string Entry(std::string_view name, std::string_view body) {
  return fmt::format(R"({{"{}":{{{}}}}})", name, body);
}

std::vector<BadCase> BadCases() {
  const std::string ok_body = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  return {
      {"short file", {1, 2, 3, 4, 5}, {"truncated", "5 bytes"}},
      {"empty file", {}, {"truncated"}},
      {"length beyond file", WithLength(100, 20), {"header length 100", "beyond the end"}},
      {"huge length", WithLength(1ull << 40, 16), {"exceeds the limit"}},
      {"max u64 length", WithLength(~0ull, 16), {"exceeds the limit"}},
      {"invalid json", RawSafetensors(R"({"w":)", 0), {"invalid JSON"}},
      {"trailing garbage", RawSafetensors(R"({}x)", 0), {"invalid JSON"}},
      {"not an object", RawSafetensors("[1,2]", 0), {"must be a JSON object", "array"}},
      {"string header", RawSafetensors(R"("hi")", 0), {"must be a JSON object"}},
      {"entry not object", RawSafetensors(R"({"w":3})", 0), {"tensor 'w'", "must be an object"}},
      {"missing dtype",
       RawSafetensors(Entry("w", R"("shape":[2],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "missing 'dtype'"}},
      {"missing shape",
       RawSafetensors(Entry("w", R"("dtype":"F32","data_offsets":[0,8])"), 8),
       {"tensor 'w'", "missing 'shape'"}},
      {"missing offsets",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2])"), 8),
       {"tensor 'w'", "missing 'data_offsets'"}},
      {"dtype not string",
       RawSafetensors(Entry("w", R"("dtype":4,"shape":[2],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "'dtype' must be a string"}},
      {"shape not array",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":"2","data_offsets":[0,8])"), 8),
       {"tensor 'w'", "'shape' must be an array"}},
      {"offsets not array",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2],"data_offsets":8)"), 8),
       {"tensor 'w'", "'data_offsets' must be an array"}},
      {"offsets wrong length",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,8,8])"), 8),
       {"tensor 'w'", "3 elements"}},
      {"negative dim",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "shape[0] is negative"}},
      {"non-integer dim",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2,1.5],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "shape[1]", "non-integer"}},
      {"string dim",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":["2"],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "shape[0]", "string"}},
      {"shape product overflow",
       RawSafetensors(Entry("w", R"("dtype":"U8","shape":[4294967296,4294967296,16],)"
                                 R"("data_offsets":[0,8])"),
                      8),
       {"tensor 'w'", "overflows"}},
      {"byte size overflow",
       RawSafetensors(Entry("w", R"("dtype":"F64","shape":[4611686018427387904],)"
                                 R"("data_offsets":[0,8])"),
                      8),
       {"tensor 'w'", "overflows the byte size"}},
      {"dim beyond int64",
       RawSafetensors(Entry("w", R"("dtype":"U8","shape":[18446744073709551615],)"
                                 R"("data_offsets":[0,8])"),
                      8),
       {"tensor 'w'", "overflows"}},
      {"negative offset",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])"), 8),
       {"tensor 'w'", "data_offsets[0] is negative"}},
      {"end beyond data",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), 4),
       {"tensor 'w'", "beyond the data section of 4 bytes"}},
      {"begin after end",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[8,0])"), 8),
       {"tensor 'w'", "begin 8 > end 0"}},
      {"size mismatch",
       RawSafetensors(Entry("w", R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "span 8 bytes", "needs 12 bytes"}},
      {"unknown dtype",
       RawSafetensors(Entry("w", R"("dtype":"F4","shape":[2],"data_offsets":[0,8])"), 8),
       {"tensor 'w'", "unknown dtype 'F4'"}},
      {"overlap",
       RawSafetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      12),
       {"tensor 'b'", "overlap tensor 'a'"}},
      {"same range",
       RawSafetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                      8),
       {"overlap"}},
      {"contained",
       RawSafetensors(R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},)"
                      R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},)"
                      R"("c":{"dtype":"U8","shape":[2],"data_offsets":[8,10]}})",
                      16),
       {"overlap tensor 'a'"}},
      {"duplicate name",
       RawSafetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                      16),
       {"duplicate key 'w'"}},
      {"duplicate field",
       RawSafetensors(Entry("w", ok_body + R"(,"dtype":"F32")"), 8),
       {"duplicate key 'dtype'"}},
      {"non-utf8 name",
       RawSafetensors(Entry("layer.w\xff", ok_body), 8),
       {"not valid UTF-8 at byte 9", "after \"layer.w\""}},
      {"overlong utf8 name", RawSafetensors(Entry("w\xc0\xaf", ok_body), 8), {"not valid UTF-8"}},
      {"lone surrogate escape", RawSafetensors(Entry(R"(w\ud800)", ok_body), 8), {"invalid JSON"}},
      {"metadata not object",
       RawSafetensors(R"({"__metadata__":[1]})", 0),
       {"'__metadata__' must be an object"}},
      {"metadata value not string",
       RawSafetensors(R"({"__metadata__":{"n":1}})", 0),
       {"'__metadata__' value 'n'"}},
      {"too deep",
       RawSafetensors(Entry("w", ok_body + R"(,"x":[[[[[[[[[[1]]]]]]]]]])"), 8),
       {"nesting deeper"}},
  };
}

TEST(SafetensorsHeader, MalformedInputsNameFileAndTensor) {
  for (const auto& c : BadCases()) {
    SCOPED_TRACE(c.label);
    Status st = ParseStatus(c.bytes);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
    EXPECT_NE(st.message().find("bad.safetensors"), std::string::npos) << st.message();
    for (const auto& s : c.expect) {
      EXPECT_NE(st.message().find(s), std::string::npos)
          << "expected '" << s << "' in: " << st.message();
    }
  }
}

TEST(SafetensorsHeader, EmptyTensorsMayShareAnOffset) {
  auto bytes = RawSafetensors(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("c":{"dtype":"F32","shape":[0,7],"data_offsets":[4,4]}})",
                              4);
  auto r = ParseSafetensorsHeader(bytes.data(), bytes.size(), "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tensors.size(), 3u);
}

TEST(SafetensorsFile, OpenMissingFileIsNotFound) {
  auto r = SafetensorsFile::Open("/nonexistent/dir/x.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("x.safetensors"), std::string::npos);
}

TEST(SafetensorsFile, ViewsPointIntoTheFile) {
  auto dir = testing_util::FreshTempDir("views");
  auto bytes = RawSafetensors(R"({"a":{"dtype":"I16","shape":[2,2],"data_offsets":[0,8]}})", 8);
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<uint8_t>(i);
  std::string path = dir + "/a.safetensors";
  testing_util::WriteBytes(path, bytes);
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const TensorView* a = (*f)->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ((*f)->Find("b"), nullptr);
  EXPECT_EQ(a->numel(), 4);
  EXPECT_EQ(a->nbytes, 8u);
  EXPECT_EQ(*a->file, path);
  EXPECT_EQ((*f)->file_size(), bytes.size());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a->data[i], i);
}

TEST(SafetensorsFile, MalformedFileErrorNamesThePath) {
  auto dir = testing_util::FreshTempDir("badfile");
  std::string path = dir + "/broken.safetensors";
  testing_util::WriteBytes(
      path,
      RawSafetensors(Entry("layer.0.w", R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), 8));
  auto f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("tensor 'layer.0.w'"), std::string::npos);
}

// Checks the invariants every accepted header must satisfy against the buffer.
void CheckAccepted(const SafetensorsHeader& h, size_t size) {
  ASSERT_LE(h.data_start, size);
  uint64_t data_size = size - h.data_start;
  for (const auto& t : h.tensors) {
    ASSERT_LE(t.begin, t.end);
    ASSERT_LE(t.end, data_size);
    uint64_t n = DTypeSize(t.dtype);
    for (int64_t d : t.shape) {
      ASSERT_GE(d, 0);
      n *= static_cast<uint64_t>(d);
    }
    ASSERT_EQ(n, t.end - t.begin);
  }
}

// A valid image with a few tensors of different dtypes and metadata.
std::vector<uint8_t> ValidImage() {
  std::vector<std::vector<int64_t>> shapes = {{3, 5}, {7}, {}, {2, 0, 4}, {4, 4}};
  std::vector<DType> dtypes = {DType::kBF16, DType::kF32, DType::kI64, DType::kF8_E4M3,
                               DType::kBool};
  std::vector<std::string> names = {"a.weight", "b.bias", "c.scalar", "d.empty", "e.mask"};
  std::vector<SafetensorsHeaderItem> items;
  uint64_t total = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    uint64_t n = DTypeSize(dtypes[i]);
    for (auto d : shapes[i]) n *= d;
    items.push_back({names[i], dtypes[i], &shapes[i], n});
    total += n;
  }
  std::string header = SerializeSafetensorsHeader(items, {{"format", "pt"}});
  auto img = RawSafetensors(header, 0);
  auto data = testing_util::RandomBytes(total, 7);
  img.insert(img.end(), data.begin(), data.end());
  return img;
}

TEST(SafetensorsHeader, RandomMutationsNeverCrash) {
  const auto base = ValidImage();
  {
    auto r = ParseSafetensorsHeader(base.data(), base.size(), "base");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::mt19937_64 rng(12345);
  int accepted = 0;
  constexpr int kIters = 20000;
  for (int it = 0; it < kIters; ++it) {
    std::vector<uint8_t> m = base;
    int kind = static_cast<int>(rng() % 5);
    size_t hdr_end = std::min<size_t>(m.size(), 8 + (base[0] | (base[1] << 8)));
    int flips = 1 + static_cast<int>(rng() % 4);
    switch (kind) {
      case 0:  // flip bytes anywhere in the length + header
        for (int k = 0; k < flips; ++k) m[rng() % hdr_end] ^= static_cast<uint8_t>(1 + rng() % 255);
        break;
      case 1:  // set a header byte to an interesting character
        for (int k = 0; k < flips; ++k) {
          static const char kChars[] = "{}[]\",:0123456789-.e\\ \xff\x80";
          m[8 + rng() % (hdr_end - 8)] = static_cast<uint8_t>(kChars[rng() % (sizeof(kChars) - 1)]);
        }
        break;
      case 2:  // truncate
        m.resize(rng() % m.size());
        break;
      case 3:  // delete a range in the header (keeps the stated length)
      {
        size_t a = 8 + rng() % (hdr_end - 8);
        size_t len = 1 + rng() % 8;
        m.erase(m.begin() + a, m.begin() + std::min(m.size(), a + len));
        break;
      }
      default:  // corrupt the length field
        m[rng() % 8] = static_cast<uint8_t>(rng());
        break;
    }
    m.shrink_to_fit();
    auto r = ParseSafetensorsHeader(m.data(), m.size(), "mutant");
    if (r.ok()) {
      ++accepted;
      CheckAccepted(*r, m.size());
    } else {
      EXPECT_NE(r.status().message().find("mutant"), std::string::npos) << r.status().message();
    }
  }
  // Some mutations (e.g. in data bytes or padding) leave a valid file.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kIters);
}

TEST(SafetensorsHeader, ReplaysFuzzRegressions) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(MX_SOURCE_DIR) / "tests/fuzz-regressions/safetensors";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename().string()[0] == '.' ||
        e.path().extension() == ".md") {
      continue;
    }
    SCOPED_TRACE(e.path().string());
    auto bytes = testing_util::ReadBytes(e.path().string());
    bytes.shrink_to_fit();
    auto r = ParseSafetensorsHeader(bytes.data(), bytes.size(), e.path().filename().string());
    if (r.ok()) CheckAccepted(*r, bytes.size());
    // The same file through the mmap path.
    auto f = SafetensorsFile::Open(e.path().string());
    EXPECT_EQ(f.ok(), r.ok());
    ++n;
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace mx::safetensors_test
