// Helpers the kernel benches share (gemm_bench.cpp, fp8_bench.cpp): key=value arguments, comma
// lists, "NxK" shapes and best / median timing of repeated runs.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mx::bench {

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Overrides the defaults in `a` with argv's key=value pairs; false (and a message naming `tool`)
// on an unknown key or a word without '='.
inline bool ParseArgs(int argc, char** argv, const char* tool,
                      std::map<std::string, std::string>& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t eq = s.find('=');
    if (eq == std::string::npos || !a.count(s.substr(0, eq))) {
      fmt::print(stderr, "{}: unknown argument '{}'\n", tool, s);
      return false;
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return true;
}

// "1,2,3" → {1, 2, 3}.
inline std::vector<int64_t> Ints(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(std::stoll(t));
  return v;
}

// "a,b" → {"a", "b"}.
inline std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(t);
  return v;
}

// "2048x768,..." → {(2048, 768), ...}: (n, k) = (output features, input features).
inline std::vector<std::pair<int64_t, int64_t>> Shapes(const std::string& s) {
  std::vector<std::pair<int64_t, int64_t>> v;
  std::stringstream ss(s);
  for (std::string sh; std::getline(ss, sh, ',');) {
    const size_t x = sh.find('x');
    v.emplace_back(std::stoll(sh.substr(0, x)), std::stoll(sh.substr(x + 1)));
  }
  return v;
}

struct Stats {
  double best, median;  // seconds
};

// fn(0) once to warm up, then fn(1) .. fn(reps) timed (the argument lets a run pick its data).
template <typename Fn>
Stats Time(int reps, Fn fn) {
  fn(0);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    fn(r + 1);
    t.push_back(Now() - t0);
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

}  // namespace mx::bench
