// `mxserve bench offline` on the tiny checkpoint: the JSON rows side_by_side.py reads (llama-bench
// field names, one row per test, sane values) for exactly the argument forms the script sends,
// the markdown table, and clear usage errors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include <nlohmann/json.hpp>

namespace mx::bench_offline_test {
namespace {

const std::string kTiny = std::string(MX_TEST_DATA_DIR) + "/tiny";

struct CmdOut {
  int code;
  std::string out;  // stdout (and stderr with stderr_too)
};

CmdOut Offline(const std::string& args, bool stderr_too = false) {
  const std::string cmd =
      std::string(MXSERVE_BIN) + " bench offline " + args + (stderr_too ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

nlohmann::json Rows(const std::string& args) {
  CmdOut r = Offline(args);
  EXPECT_EQ(r.code, 0) << args << "\n" << Offline(args, true).out;
  // stdout is the JSON array and nothing else (progress is on stderr).
  auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_array()) << r.out;
  return j.is_array() ? j : nlohmann::json::array();
}

void ExpectSaneRow(const nlohmann::json& row, const std::string& test, int64_t n_prompt,
                   int64_t n_gen, int reps) {
  SCOPED_TRACE(test);
  for (const char* f :
       {"test", "n_prompt", "n_gen", "n_threads", "avg_ts", "stddev_ts", "samples_ts",
        "model_filename", "kernels", "kv_cache_dtype", "avg_ns", "samples_ns"}) {
    EXPECT_TRUE(row.contains(f)) << f;
  }
  EXPECT_EQ(row["test"], test);
  EXPECT_EQ(row["n_prompt"], n_prompt);
  EXPECT_EQ(row["n_gen"], n_gen);
  EXPECT_EQ(row["n_threads"], 1);
  EXPECT_EQ(row["model_filename"], kTiny);
  const std::string k = row["kernels"];
  EXPECT_TRUE(k == "ref" || k == "avx2" || k == "avx512") << k;
  const std::vector<double> ts = row["samples_ts"];
  const std::vector<int64_t> ns = row["samples_ns"];
  ASSERT_EQ(ts.size(), static_cast<size_t>(reps));
  ASSERT_EQ(ns.size(), ts.size());
  const int64_t tokens = n_gen > 0 ? n_gen : n_prompt;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_TRUE(std::isfinite(ts[i]) && ts[i] > 0) << ts[i];
    // tokens/s and ns describe the same run.
    EXPECT_NEAR(ts[i], tokens / (ns[i] * 1e-9), 1e-3 * ts[i]);
  }
  const double mean = std::accumulate(ts.begin(), ts.end(), 0.0) / ts.size();
  EXPECT_NEAR(row["avg_ts"].get<double>(), mean, 1e-9 * mean);
  EXPECT_GE(row["stddev_ts"].get<double>(), 0.0);
}

TEST(BenchOffline, JsonRowsForSideBySideArgumentForms) {
  // The three forms ../shared/anchors/side_by_side.py sends, one test each.
  const std::string common = " -t 1 -r 2 -o json";
  nlohmann::json pp = Rows(kTiny + " -p 24 -n 0" + common);
  ASSERT_EQ(pp.size(), 1u);
  ExpectSaneRow(pp[0], "pp24", 24, 0, 2);
  EXPECT_EQ(pp[0]["kv_cache_dtype"], "bf16");    // auto = serve's default
  EXPECT_EQ(pp[0]["gemm_activations"], "bf16");  // serve's default
  nlohmann::json tg = Rows(kTiny + " -p 0 -n 6" + common);
  ASSERT_EQ(tg.size(), 1u);
  ExpectSaneRow(tg[0], "tg6", 0, 6, 2);
  nlohmann::json gp = Rows(kTiny + " -p 0 -n 0 -gp 20,4" + common);
  ASSERT_EQ(gp.size(), 1u);
  ExpectSaneRow(gp[0], "tg4@pp20", 20, 4, 2);
}

TEST(BenchOffline, ListsKernelsAndKvCacheDtype) {
  nlohmann::json rows =
      Rows(kTiny + " -p 8,16 -n 3 --gp 8,2 -t 1 -r 1 -o json --kernels ref " +
           "--kv-cache-dtype fp8_e4m3 --chunked-prefill-size 5 " + "--gemm-activations fp32");
  ASSERT_EQ(rows.size(), 4u);
  ExpectSaneRow(rows[0], "pp8", 8, 0, 1);
  ExpectSaneRow(rows[1], "pp16", 16, 0, 1);
  ExpectSaneRow(rows[2], "tg3", 0, 3, 1);
  ExpectSaneRow(rows[3], "tg2@pp8", 8, 2, 1);
  for (const auto& row : rows) {
    EXPECT_EQ(row["kernels"], "ref");
    EXPECT_EQ(row["kv_cache_dtype"], "fp8_e4m3");
    EXPECT_EQ(row["gemm_activations"], "fp32");
    EXPECT_EQ(row["n_batch"], 5);
  }
}

TEST(BenchOffline, MarkdownTableByDefault) {
  CmdOut r = Offline(kTiny + " -p 8 -n 2 -t 1 -r 1");
  ASSERT_EQ(r.code, 0) << Offline(kTiny + " -p 8 -n 2 -t 1 -r 1", true).out;
  EXPECT_NE(r.out.find("| model |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg2 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ± "), std::string::npos) << r.out;
}

// side_by_side.py's own parser on our output, when the script is there to import.
TEST(BenchOffline, SideBySideScriptParsesTheOutput) {
  namespace fs = std::filesystem;
  const fs::path script = fs::path(MX_SHARED_DIR) / "anchors" / "side_by_side.py";
  if (!fs::exists(script) || std::system("python3 --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no " << script << " or no python3";
  }
  CmdOut r = Offline(kTiny + " -p 0 -n 5 -t 1 -r 3 -o json");
  ASSERT_EQ(r.code, 0);
  const fs::path out = fs::path(::testing::TempDir()) / "mx_bench_offline.json";
  std::ofstream(out) << r.out;
  const std::string cmd = "python3 -c \"import sys; sys.path.insert(0, '" +
                          script.parent_path().string() +
                          "'); import side_by_side as s; x = s.samples(open('" + out.string() +
                          "').read(), 'mxserve'); print(len(x), min(x) > 0)\"";
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 256> buf{};
  const size_t n = fread(buf.data(), 1, buf.size() - 1, p);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(std::string(buf.data(), n), "3 True\n");
  fs::remove(out);
}

TEST(BenchOffline, BadArgumentsGiveClearErrors) {
  struct Case {
    std::string args;
    int code;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {kTiny + " -o xml", 2, "-o 'xml'"},
           {kTiny + " -p abc", 2, "-p 'abc'"},
           {kTiny + " -n 4,-1", 2, "-n '4,-1'"},
           {kTiny + " -gp 512", 2, "-gp '512'"},
           {kTiny + " -r 0", 2, "-r 0"},
           {kTiny + " -p 0 -n 0", 2, "no test"},
           {kTiny + " --kv-cache-dtype int3", 2, "int3"},
           {kTiny + " -p 1024 -n 0 -r 1", 1, "context window"},
           {kTiny + " -p 8 -n 0 -r 1 --kernels avx9", 1, "avx9"},
           {"/nonexistent/model -r 1", 1, "/nonexistent/model"},
       }) {
    CmdOut r = Offline(c.args, /*stderr_too=*/true);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace mx::bench_offline_test
