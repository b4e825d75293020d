// `mxserve bench` against a real `mxserve serve` of the bundled model (bf16, one worker thread,
// 64-token KV pages, a free loopback port). Every run must succeed in full, produce exactly the
// requested token counts (ignore_eos), see the radix cache hit exactly the shared prefix it
// warmed, report ordered latency percentiles, and agree with the server's own /metrics
// counters token for token. Nothing is asserted about how fast anything is.
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "../common/serve_process.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kWork = fs::temp_directory_path() / ("mx-bench-e2e-" + std::to_string(::getpid()));
const std::string kModelDir = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";
constexpr int kPageSize = 64;  // the server's --page-size: radix hits are whole pages

using mx::e2e::Slurp;

std::vector<json> JsonLines(const fs::path& p) {
  std::vector<json> out;
  std::ifstream f(p);
  for (std::string line; std::getline(f, line);) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

std::pair<long, std::string> Get(const std::string& url) { return mx::e2e::HttpGet(url); }

// The served model's counters from /metrics: "mxserve:NAME{model="arith"} VALUE" -> NAME.
std::map<std::string, double> Counters(const std::string& url) {
  auto [code, text] = Get(url + "/metrics");
  EXPECT_EQ(code, 200) << text;
  std::map<std::string, double> out;
  std::istringstream in(text);
  const std::string tail = "{model=\"arith\"} ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("mxserve:", 0) != 0) continue;
    const size_t brace = line.find(tail);
    if (brace == std::string::npos) continue;
    out[line.substr(8, brace - 8)] = std::stod(line.substr(brace + tail.size()));
  }
  return out;
}

// The counters once the engine has finished `n` more requests than in `before`: it publishes
// its counters after each step, so a scrape right after the client saw the last token can be
// one step behind (at most a few ms; 10 s is only a bound).
std::map<std::string, double> CountersAfter(const std::string& url,
                                            const std::map<std::string, double>& before,
                                            int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const double want = before.count("requests_finished_total")
                          ? before.at("requests_finished_total") + static_cast<double>(n)
                          : static_cast<double>(n);
  for (;;) {
    std::map<std::string, double> c = Counters(url);
    if ((c.count("requests_finished_total") && c.at("requests_finished_total") >= want) ||
        std::chrono::steady_clock::now() > deadline) {
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

struct Delta {
  std::map<std::string, double> before, after;
  int64_t operator[](const std::string& name) const {
    EXPECT_TRUE(after.count(name)) << "no counter mxserve:" << name;
    return static_cast<int64_t>(after.at(name) - before.at(name));
  }
};

using mx::e2e::Cmd;

// stdout and stderr apart: stdout carries the tables, stderr the per-point lines.
Cmd Mxserve(const std::string& args) {
  return mx::e2e::RunCommand(MXSERVE_BIN, args, kWork / "cmd.stderr");
}

// A latency summary in the JSON: positive, and mean/percentiles in order.
void ExpectOrdered(const json& r, const std::string& name, bool strictly_positive) {
  const double p50 = r["median_" + name + "_ms"], p90 = r["p90_" + name + "_ms"];
  const double p95 = r["p95_" + name + "_ms"], p99 = r["p99_" + name + "_ms"];
  if (strictly_positive) {
    EXPECT_GT(p50, 0) << name;
  } else {
    EXPECT_GE(p50, 0) << name;
    EXPECT_GT(p99, 0) << name;
  }
  EXPECT_LE(p50, p90) << name;
  EXPECT_LE(p90, p95) << name;
  EXPECT_LE(p95, p99) << name;
  EXPECT_GT(r["mean_" + name + "_ms"].get<double>(), 0) << name;
  EXPECT_GE(r["std_" + name + "_ms"].get<double>(), 0) << name;
}

// The random shared-prefix workload every serve/sweep run here uses.
struct Workload {
  int num_prompts;
  int input_len = 320;
  int output_len = 24;
  double prefix_ratio = 0.6;
  int groups = 2;
  int seed;
  int prefix_len() const { return static_cast<int>(prefix_ratio * input_len + 0.5); }
  // Whole pages of the prefix: what a warmed radix cache can hand back.
  int cached_per_request() const { return prefix_len() / kPageSize * kPageSize; }
  std::string Flags() const {
    return " --model arith --tokenizer " + kModelDir + " --random-input-len " +
           std::to_string(input_len) + " --random-output-len " + std::to_string(output_len) +
           " --shared-prefix-ratio " + std::to_string(prefix_ratio) + " --num-prefix-groups " +
           std::to_string(groups) + " --warm-prefixes --warmup-requests 1 --seed " +
           std::to_string(seed) + " --request-timeout 120";
  }
  // What the client sends besides the measured requests: one warm-up request of input_len
  // tokens with min(output_len, 32) out, and each group's prefix once with max_tokens 1.
  int64_t extra_prompt_tokens() const { return input_len + groups * prefix_len(); }
  int64_t extra_output_tokens() const { return std::min(output_len, 32) + groups; }
  int64_t extra_requests() const { return 1 + groups; }
};

// One measured run's JSON line against the workload: everything succeeded, exact lengths,
// the warmed prefix came from the cache for every request.
void ExpectRun(const json& r, const Workload& w) {
  SCOPED_TRACE(r.dump().substr(0, 600));
  EXPECT_EQ(r["num_prompts"], w.num_prompts);
  EXPECT_EQ(r["completed"], w.num_prompts);
  EXPECT_EQ(r["failed"], 0);
  EXPECT_EQ(r["success_rate"], 1.0);
  EXPECT_TRUE(r["errors_by_kind"].empty());
  EXPECT_EQ(r["output_len_mismatches"], 0);
  EXPECT_EQ(r["total_input_tokens"], w.num_prompts * w.input_len);
  EXPECT_EQ(r["total_output_tokens"], w.num_prompts * w.output_len);
  EXPECT_GT(r["total_output_tokens_retokenized"].get<int64_t>(), 0);
  const json& cache = r["cache_report"];
  EXPECT_EQ(cache["total_prompt_tokens"], w.num_prompts * w.input_len);
  EXPECT_EQ(cache["total_cached_tokens"], w.num_prompts * w.cached_per_request());
  EXPECT_NEAR(cache["cache_hit_rate_pct"].get<double>(), 100.0 * w.prefix_ratio, 1e-9);
  ExpectOrdered(r, "ttft", true);
  ExpectOrdered(r, "e2e_latency", true);
  // Chunks that reach the client in one read share a time stamp: a gap may be 0.
  ExpectOrdered(r, "itl", false);
  ExpectOrdered(r, "tpot", false);
  EXPECT_LE(r["median_ttft_ms"].get<double>(), r["median_e2e_latency_ms"].get<double>());
  EXPECT_GT(r["duration"].get<double>(), 0);
  EXPECT_GT(r["output_throughput"].get<double>(), 0);
  EXPECT_GE(r["max_concurrent_requests"].get<int>(), 1);
  EXPECT_LE(r["max_concurrent_requests"].get<int>(), w.num_prompts);
}

// One server for the whole suite (one per process: ctest runs each test in its own).
class BenchE2e : public mx::e2e::ServedSuite<BenchE2e> {
 public:
  static fs::path WorkDir() { return kWork; }
  static std::vector<std::string> ServeArgs() {
    return {"--threads",
            "1",
            "serve",
            kModelDir,
            "--served-model-name",
            "arith",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--page-size",
            std::to_string(kPageSize),
            "--no-webui"};
  }
};

TEST_F(BenchE2e, ServeWarmedPrefixesHitTheRadixCache) {
  const Workload w{.num_prompts = 12, .seed = 11};
  const fs::path out = kWork / "serve.jsonl";
  Delta d;
  d.before = Counters(url_);
  Cmd r =
      Mxserve("bench serve --base-url " + url_ + w.Flags() +
              " --num-prompts 12 --request-rate 8 --output-details --output-file " + out.string());
  d.after = Counters(url_);
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("Successful requests:");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(std::atoi(r.out.c_str() + at + 20), 12) << r.out;
  const std::vector<json> lines = JsonLines(out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const json& j = lines[0];
  ExpectRun(j, w);
  EXPECT_EQ(j["request_rate"], 8.0);
  EXPECT_EQ(j["model_id"], "arith");
  EXPECT_EQ(j["backend"], "openai");

  // Per request: exact lengths, the whole warmed prefix from the cache, nothing beyond it.
  ASSERT_EQ(j["input_lens"].size(), 12u);
  size_t gaps = 0;
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(j["input_lens"][i], w.input_len) << i;
    EXPECT_EQ(j["output_lens"][i], w.output_len) << i;
    EXPECT_EQ(j["cached_tokens"][i], w.cached_per_request()) << i;
    EXPECT_GT(j["ttfts"][i].get<double>(), 0) << i;
    // One gap per further text chunk: a chunk carries one token or more (never fewer).
    EXPECT_LE(j["itls"][i].size(), static_cast<size_t>(w.output_len - 1)) << i;
    gaps += j["itls"][i].size();
    EXPECT_EQ(j["errors"][i], "") << i;
  }
  EXPECT_GT(gaps, 0u);

  // The server counted what the client counted, plus the client's warm-up traffic.
  EXPECT_EQ(d["requests_total"], 12 + w.extra_requests());
  EXPECT_EQ(d["requests_finished_total"], 12 + w.extra_requests());
  EXPECT_EQ(d["prompt_tokens_total"],
            j["total_input_tokens"].get<int64_t>() + w.extra_prompt_tokens());
  EXPECT_EQ(d["generation_tokens_total"],
            j["total_output_tokens"].get<int64_t>() + w.extra_output_tokens());
  // Warm-ups are fresh random prompts: every cached token is a measured request's.
  EXPECT_EQ(d["cached_prompt_tokens_total"],
            j["cache_report"]["total_cached_tokens"].get<int64_t>());
}

TEST_F(BenchE2e, SweepTwoRatesFreshPrefixesPerRate) {
  const Workload w{.num_prompts = 8, .seed = 23};
  const fs::path out = kWork / "sweep.jsonl", summary = kWork / "sweep.json",
                 html = kWork / "sweep.html";
  Delta d;
  d.before = Counters(url_);
  Cmd r = Mxserve("bench sweep --base-url " + url_ + w.Flags() +
                  " --request-rates 3,6 --num-prompts 8 --ttft-slo-ms 60000 --slo-percentile 95 "
                  "--node-price-per-hour 2 --output-file " +
                  out.string() + " --summary-file " + summary.string() + " --html-file " +
                  html.string());
  d.after = CountersAfter(url_, d.before, 2 * (8 + w.extra_requests()));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<json> lines = JsonLines(out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  int64_t input = 0, output = 0, cached = 0;
  for (size_t i = 0; i < 2; ++i) {
    ExpectRun(lines[i], w);
    EXPECT_EQ(lines[i]["request_rate"], i == 0 ? 3.0 : 6.0);
    EXPECT_GT(lines[i]["usd_per_million_output_tokens"].get<double>(), 0);
    input += lines[i]["total_input_tokens"].get<int64_t>();
    output += lines[i]["total_output_tokens"].get<int64_t>();
    cached += lines[i]["cache_report"]["total_cached_tokens"].get<int64_t>();
  }
  // A fresh seed per rate: the second rate's prefixes were not in the cache from the first,
  // so it hit only because it warmed its own (the 60% above), and the seeds differ.
  EXPECT_NE(lines[0]["seed"], lines[1]["seed"]);

  const json s = json::parse(Slurp(summary));
  ASSERT_EQ(s["points"].size(), 2u);
  double knee = -1;
  for (size_t i = 0; i < 2; ++i) {
    const json& p = s["points"][i];
    EXPECT_EQ(p["request_rate"], lines[i]["request_rate"]);
    EXPECT_EQ(p["completed"], 8);
    EXPECT_EQ(p["sustained"], lines[i]["sustained"]);
    EXPECT_EQ(p["sustained"], p["verdict"] == "sustained") << p.dump();
    EXPECT_NEAR(p["cache_hit_rate_pct"].get<double>(), 60.0, 1e-9);
    if (p["sustained"].get<bool>()) knee = p["request_rate"];
    // The table on stdout has a row per rate.
    EXPECT_NE(r.out.find(p["verdict"].get<std::string>()), std::string::npos) << r.out;
  }
  // The knee is the highest sustained rate, or none.
  if (knee < 0) {
    EXPECT_TRUE(s["knee"].is_null()) << s.dump();
  } else {
    EXPECT_EQ(s["knee"]["request_rate"], knee) << s.dump();
    EXPECT_NE(r.out.find("knee: "), std::string::npos) << r.out;
  }
  const std::string page = Slurp(html);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);

  EXPECT_EQ(d["requests_total"], 2 * (8 + w.extra_requests()));
  EXPECT_EQ(d["prompt_tokens_total"], input + 2 * w.extra_prompt_tokens());
  EXPECT_EQ(d["generation_tokens_total"], output + 2 * w.extra_output_tokens());
  EXPECT_EQ(d["cached_prompt_tokens_total"], cached);
}

TEST_F(BenchE2e, SingleStreamAaPresetScaled) {
  // --scale 0.1: 1,000 tokens in, 150 out (long enough that the stream arrives in several
  // reads even on a busy machine), 2 runs over the chat endpoint.
  const fs::path out = kWork / "single.jsonl";
  Delta d;
  d.before = Counters(url_);
  Cmd r =
      Mxserve("bench single-stream --base-url " + url_ + " --model arith --tokenizer " + kModelDir +
              " --preset aa-single-stream --scale 0.1 --runs 2 --request-timeout 120 "
              "--output-file " +
              out.string());
  d.after = CountersAfter(url_, d.before, 2);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("; 0 failed"), std::string::npos) << r.out;
  const std::vector<json> lines = JsonLines(out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const json& j = lines[0];
  SCOPED_TRACE(j.dump());
  EXPECT_EQ(j["benchmark"], "single-stream");
  EXPECT_EQ(j["endpoint"], "chat");
  EXPECT_EQ(j["input_len"], 1000);
  EXPECT_EQ(j["output_len"], 150);
  EXPECT_EQ(j["failed"], 0);
  ASSERT_EQ(j["runs"].size(), 2u);
  int64_t prompt = 0;
  for (const json& run : j["runs"]) {
    EXPECT_TRUE(run["success"].get<bool>());
    // The chat template wraps the 1,000-token text in a few tokens of its own.
    EXPECT_GT(run["prompt_tokens"].get<int>(), 1000);
    EXPECT_LT(run["prompt_tokens"].get<int>(), 1040);
    EXPECT_EQ(run["output_tokens_server"], 150);
    EXPECT_GT(run["output_tokens_tokenizer"].get<int>(), 0);
    EXPECT_GE(run["first_chunk_tokens"].get<int>(), 1);
    EXPECT_GT(run["ttft_ms"].get<double>(), 0);
    EXPECT_GT(run["e2e_latency_s"].get<double>() * 1e3, run["ttft_ms"].get<double>());
    EXPECT_GT(run["output_speed_server_tok_s"].get<double>(), 0);
    EXPECT_GT(run["output_speed_tokenizer_tok_s"].get<double>(), 0);
    prompt += run["prompt_tokens"].get<int64_t>();
  }
  EXPECT_GT(j["median_output_speed_server_tok_s"].get<double>(), 0);
  EXPECT_GT(j["median_ttft_ms"].get<double>(), 0);

  // One request at a time, no warm-up: the server saw exactly these.
  EXPECT_EQ(d["requests_total"], 2);
  EXPECT_EQ(d["prompt_tokens_total"], prompt);
  EXPECT_EQ(d["generation_tokens_total"], 300);
  // Unique prompts (a per-run nonce after a template head shorter than a page): no cache hit.
  EXPECT_EQ(d["cached_prompt_tokens_total"], 0);
}

// Two sessions of three turns over chat completions: exact output lengths (ignore_eos), every
// later turn served largely from the radix cache (it repeats the previous turn and its reply),
// and the server's counters agree with the client's usage totals token for token.
TEST_F(BenchE2e, SessionsGrowTheContextAndHitTheCache) {
  const fs::path out = kWork / "sessions.jsonl";
  const fs::path html = kWork / "sessions.html";
  Delta d;
  d.before = Counters(url_);
  Cmd r = Mxserve("bench sessions --base-url " + url_ + " --model arith --tokenizer " + kModelDir +
                  " --sessions 2 --turns 3 --system-len 160 --first-user-len 40"
                  " --tool-result-len 60 --output-len 12 --request-timeout 120 --output-file " +
                  out.string() + " --html-file " + html.string());
  d.after = CountersAfter(url_, d.before, 7);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<json> lines = JsonLines(out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const json& j = lines[0];
  SCOPED_TRACE(j.dump().substr(0, 2000));
  EXPECT_EQ(j["api"], "chat");
  EXPECT_EQ(j["units"], "tokens");
  EXPECT_EQ(j["completed_sessions"], 2);
  EXPECT_EQ(j["failed_sessions"], 0);
  ASSERT_EQ(j["per_turn"].size(), 3u);
  int64_t prev_prompt = 0;
  for (const json& t : j["per_turn"]) {
    EXPECT_EQ(t["completed"], 2);
    EXPECT_EQ(t["total_output_tokens"], 2 * 12);
    // The context grows by the reply and a tool result each turn.
    EXPECT_GT(t["total_input_tokens"].get<int64_t>(), prev_prompt);
    prev_prompt = t["total_input_tokens"].get<int64_t>();
    const json& c = t["cache_report"];
    EXPECT_LE(c["total_cached_tokens"].get<int64_t>(), c["total_prompt_tokens"].get<int64_t>());
    EXPECT_GT(t["median_ttft_ms"].get<double>(), 0);
    EXPECT_GT(t["expected_cache_hit_pct"].get<double>(), 0);
  }
  // The warmed system prompt is more than a page; turns 2 and 3 repeat at least two pages per
  // session.
  EXPECT_GE(j["per_turn"][0]["cache_report"]["total_cached_tokens"].get<int64_t>(), 2 * kPageSize);
  for (int t = 1; t < 3; ++t) {
    EXPECT_GE(j["per_turn"][t]["cache_report"]["total_cached_tokens"].get<int64_t>(),
              2 * 2 * kPageSize)
        << t;
  }
  EXPECT_GT(j["mean_session_completion_s"].get<double>(), 0);
  EXPECT_GT(j["overall"]["stream_output_tok_s"].get<double>(), 0);
  // The warm-up (max_tokens 1) and the six turns.
  EXPECT_EQ(d["requests_total"], 7);
  EXPECT_EQ(d["generation_tokens_total"], 1 + 6 * 12);
  // The server counted the warm-up's prompt besides the turns'; the warm-up itself hit nothing
  // (a fresh server per test), so every cached token it counted is a turn's.
  EXPECT_GT(d["prompt_tokens_total"], j["overall"]["total_input_tokens"].get<int64_t>());
  EXPECT_EQ(d["cached_prompt_tokens_total"],
            j["overall"]["cache_report"]["total_cached_tokens"].get<int64_t>());
  EXPECT_NE(Slurp(html).find("<svg"), std::string::npos);
}

// Anthropic Messages and OpenAI Responses: the server accepts every turn's body (the replies,
// reasoning included, sent back in each API's own shape).
TEST_F(BenchE2e, SessionsOverMessagesAndResponses) {
  for (const std::string api : {"messages", "responses"}) {
    SCOPED_TRACE(api);
    const fs::path out = kWork / ("sessions-" + api + ".jsonl");
    Cmd r = Mxserve("bench sessions --api " + api + " --base-url " + url_ +
                    " --model arith --tokenizer " + kModelDir +
                    " --sessions 2 --turns 2 --system-len 80 --first-user-len 20"
                    " --tool-result-len 30 --output-len 8 --request-timeout 120 --html-file ''"
                    " --output-file " +
                    out.string());
    const std::vector<json> lines = JsonLines(out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    const json& j = lines[0];
    SCOPED_TRACE(j.dump().substr(0, 2000));
    EXPECT_EQ(j["api"], api);
    // No EOS override in these APIs: a turn that yields no token at all fails as no_output,
    // never as a rejected request.
    for (const auto& [kind, n] : j["errors_by_kind"].items()) EXPECT_EQ(kind, "no_output");
    EXPECT_EQ(j["completed_sessions"].get<int>() + j["failed_sessions"].get<int>(), 2);
    EXPECT_GE(j["per_turn"][0]["completed"].get<int>(), 1);
  }
}

}  // namespace
