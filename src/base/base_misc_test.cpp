// Status/Result, CHECK, dtype names, mmap and CPU feature detection.
#include <fcntl.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/mmap.h"
#include "base/page_cache_test_util.h"
#include "base/scratch.h"
#include "base/status.h"
#include "base/strings.h"
#include "base/wait_test_util.h"

namespace mx {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("x: {} is odd", x);
  return x / 2;
}

Status Chain(int x, int* out) {
  MX_ASSIGN_OR_RETURN(int h, Half(x));
  MX_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, ResultAndMacros) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x: 3 is odd");
  EXPECT_EQ(s.ToString(), "InvalidArgument: x: 3 is odd");
  EXPECT_EQ(s.WithContext("file.json").message(), "file.json: x: 3 is odd");
}

TEST(CheckDeathTest, ReportsExpectedActualAndLocation) {
  int a = 3;
  EXPECT_DEATH(MX_CHECK_EQ(a, 4),
               "base_misc_test.cpp:[0-9]+: CHECK failed: a == 4 \\(expected 4, actual 3\\)");
  EXPECT_DEATH(MX_CHECK(a > 5), "CHECK failed: a > 5");
}

TEST(DType, NamesAndSizes) {
  for (const char* name : {"BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2", "U8", "I8", "I16",
                           "I32", "I64", "BOOL"}) {
    auto t = ParseDType(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_STREQ(DTypeName(*t), name);
  }
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  auto bad = ParseDType("F4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'F4'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("BF16"), std::string::npos);
}

TEST(MappedFile, MapsContentsAndReportsMissingFiles) {
  std::string path = ::testing::TempDir() + "/mx_mmap_test.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << "hello mmap";
  }
  auto m = MappedFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 10u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data()), m->size()), "hello mmap");
  MappedFile moved = std::move(*m);
  EXPECT_EQ(moved.size(), 10u);
  std::remove(path.c_str());

  auto missing = MappedFile::Open("/nonexistent/dir/file.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/file.safetensors"),
            std::string::npos);
  auto dir = MappedFile::Open("/tmp");
  EXPECT_FALSE(dir.ok());
}

// Released pages leave the resident set and read back the file's bytes (unaligned ranges keep
// their partial pages); a range inside one page is a no-op.
TEST(MappedFile, ReleasedPagesReadBackTheFile) {
  const std::string path = ::testing::TempDir() + "/mx_mmap_release_test.bin";
  std::vector<uint8_t> bytes(5 * 4096 + 123);
  std::mt19937 rng(17);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  }
  auto m = MappedFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  uint64_t sum = 0;
  for (size_t i = 0; i < m->size(); ++i) sum += m->data()[i];  // every page resident
  ReleaseMappedPages(m->data() + 100, 3 * 4096);
  ReleaseMappedPages(m->data() + 5, 10);
  ReleaseMappedPages(m->data(), m->size());
  EXPECT_GT(sum, 0u);
  ASSERT_EQ(m->size(), bytes.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), m->data()));
  std::remove(path.c_str());
}

// DropCache evicts its range from the page cache and nothing outside it (what it evicts inside
// depends on the page cache's folios: whole ones only), and the mapping reads the file's bytes
// afterwards.
TEST(MappedFile, DropCacheEvictsItsRangeAndNothingElse) {
  const std::string path = ::testing::TempDir() + "/mx_mmap_dropcache_test.bin";
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kPages = 64;
  std::vector<uint8_t> bytes(kPages * page);
  std::mt19937 rng(23);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(::fsync(fd), 0);  // clean pages: dirty ones are never dropped
    ::close(fd);
  }
  auto m = MappedFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto read_all = [&] {
    uint64_t sum = 0;
    for (size_t i = 0; i < m->size(); ++i) sum += m->data()[i];
    return sum;
  };
  EXPECT_GT(read_all(), 0u);  // every page cached and mapped here
  if (CachedPages(path).empty()) GTEST_SKIP() << "no page cache apart from the file here (tmpfs)";
  ASSERT_EQ(CachedPages(path), std::vector<bool>(kPages, true));
  // Mapped pages are never dropped: the loader unmaps its own first, as here.
  m->DropCache(m->data() + 8 * page, 40 * page);
  EXPECT_EQ(CachedPages(path), std::vector<bool>(kPages, true)) << "mapped pages were dropped";
  ReleaseMappedPages(m->data(), m->size());
  m->DropCache(m->data() + 8 * page, 40 * page);
  m->DropCache(m->data() + m->size(), page);  // past the end: nothing
  std::vector<bool> after = CachedPages(path);
  for (size_t i = 0; i < kPages; ++i) {
    if (i < 8 || i >= 48) EXPECT_TRUE(after[i]) << "page " << i << " is outside the range";
  }
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), m->data()));  // read back from the file
  ReleaseMappedPages(m->data(), m->size());
  m->DropCache(m->data(), m->size());
  EXPECT_EQ(CachedPages(path), std::vector<bool>(kPages, false));
  std::remove(path.c_str());
}

// PageBuffer: zero until written, every byte writable, 2 MB-aligned when huge pages are asked
// for, and a move hands the mapping over (the source ends empty).
// A scratch vector keeps its block while requests fit (contents included: nothing clears it)
// and only grows; each block holds what was asked for (ASan checks the writes).
TEST(Scratch, GrowsOnlyAndKeepsItsBlockWhileRequestsFit) {
  std::vector<float> b;
  float* p = Grow(b, 100);
  for (int i = 0; i < 100; ++i) p[i] = static_cast<float>(i);
  EXPECT_EQ(Grow(b, 10), p);
  EXPECT_EQ(Grow(b, 100), p);
  EXPECT_EQ(p[99], 99.0f);
  float* q = Grow(b, 1000);
  EXPECT_EQ(b.size(), 1000u);
  for (int i = 0; i < 1000; ++i) q[i] = 1.0f;
  EXPECT_EQ(Grow(b, 500), q);
}

TEST(PageBuffer, ZeroFilledWritableAlignedAndMovable) {
  std::mt19937 rng(std::random_device{}());
  for (bool huge : {false, true}) {
    const size_t bytes = (size_t{3} << 20) + 1 + rng() % 4096;  // not a whole number of pages
    PageBuffer b(bytes, huge);
    ASSERT_EQ(b.size(), bytes);
    ASSERT_NE(b.data(), nullptr);
    if (huge) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t{2} << 20), 0u);
    }
    std::vector<size_t> probes = {0, bytes - 1};
    for (int i = 0; i < 64; ++i) probes.push_back(rng() % bytes);
    for (size_t i : probes) EXPECT_EQ(b.data()[i], 0) << "byte " << i << " huge=" << huge;
    for (size_t i : probes) b.data()[i] = static_cast<uint8_t>(i * 131 + 7);
    for (size_t i = 0; i < bytes; i += 4096) b.data()[i] ^= 0;  // every page is writable
    PageBuffer moved = std::move(b);
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(b.data(), nullptr);
    ASSERT_EQ(moved.size(), bytes);
    for (size_t i : probes) {
      EXPECT_EQ(moved.data()[i], static_cast<uint8_t>(i * 131 + 7)) << "byte " << i;
    }
    PageBuffer other(4096);
    other = std::move(moved);
    EXPECT_EQ(other.size(), bytes);
  }
  PageBuffer empty(0);
  EXPECT_TRUE(empty.empty());
}

TEST(CpuFeatures, ConsistentImplications) {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.avx512f) {
    EXPECT_TRUE(f.avx2) << "AVX-512 machines have AVX2";
  }
  if (f.avx512vnni || f.avx512bf16) {
    EXPECT_TRUE(f.avx512f);
  }
  EXPECT_FALSE(f.ToString().empty());
}

TEST(Log, LevelNames) {
  EXPECT_TRUE(SetLogLevel("warn").ok());
  EXPECT_TRUE(SetLogLevel("off").ok());
  Status s = SetLogLevel("loud");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("loud"), std::string::npos);
  EXPECT_TRUE(SetLogLevel("info").ok());
}

TEST(Strings, TrimTakesOnlyTheGivenCharactersAtBothEnds) {
  EXPECT_EQ(Trim(" \t gzip \t "), "gzip");
  EXPECT_EQ(Trim("a b"), "a b");          // inner characters stay
  EXPECT_EQ(Trim("\r\nx\n"), "\r\nx\n");  // the default is space and tab only
  EXPECT_EQ(Trim("\r\n x\n", " \t\r\n"), "x");
  EXPECT_EQ(Trim(" \t "), "");
  EXPECT_EQ(Trim(""), "");
  const std::string_view s = "  abc ";
  EXPECT_EQ(Trim(s).data(), s.data() + 2);  // a view into the argument
}

TEST(WaitFor, ReturnsOnceTheEventHappensAndFailsLoudlyWhenItDoesNot) {
  std::atomic<bool> flag{false};
  std::thread setter([&] { flag = true; });
  EXPECT_TRUE(WaitFor([&] { return flag.load(); }, kWaitTimeout, "the flag"));
  setter.join();
  // A predicate that never holds: the wait ends at its deadline with a failure naming it.
  EXPECT_NONFATAL_FAILURE(
      EXPECT_FALSE(WaitFor([] { return false; }, std::chrono::milliseconds(1), "the never event")),
      "the never event did not happen");
}

}  // namespace
}  // namespace mx
