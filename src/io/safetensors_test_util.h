// Helpers shared by the safetensors / checkpoint tests: raw file images and temp dirs.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace mx::testing_util {

// 8-byte little-endian length + `header` + `data_bytes` bytes of 0xAB.
inline std::vector<uint8_t> RawSafetensors(std::string_view header, size_t data_bytes) {
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data_bytes, 0xAB);
  return out;
}

inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void WriteText(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
}

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The directories FreshTempDir made, removed when the test binary exits, so that repeated
// test runs leave nothing behind in the temp dir.
class TempDirsRemovedAtExit {
 public:
  TempDirsRemovedAtExit() = default;
  TempDirsRemovedAtExit(const TempDirsRemovedAtExit&) = delete;
  TempDirsRemovedAtExit& operator=(const TempDirsRemovedAtExit&) = delete;
  ~TempDirsRemovedAtExit() {
    for (const auto& d : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
  void Add(const std::filesystem::path& d) { dirs_.push_back(d); }

 private:
  std::vector<std::filesystem::path> dirs_;
};

// A fresh empty directory under the test temp dir, unique per call; removed at exit.
inline std::string FreshTempDir(std::string_view tag) {
  static int counter = 0;
  static TempDirsRemovedAtExit made;
  auto p = std::filesystem::path(::testing::TempDir()) /
           fmt::format("mx_io_{}_{}_{}", tag, ::getpid(), counter++);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  made.Add(p);
  return p.string();
}

inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace mx::testing_util
