// `mxserve eval` against a real `mxserve serve` of the bundled model (bf16, one worker thread,
// a free loopback port): 10 held-out arithmetic problems over the chat endpoint and 3 GSM8K
// questions 1-shot over the completions endpoint. The logs must line up with the data, every
// record's verdict must follow from its output, the summaries must add up, and `eval compare`
// must read them. The model's accuracy itself is not asserted (it is the model card's job).
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval/datasets.h"
#include "eval/extract.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using mx::eval::ExtractNumber;
using mx::eval::NormalizeNumber;

const fs::path kWork = fs::temp_directory_path() / ("mx-eval-e2e-" + std::to_string(::getpid()));

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<json> ReadJsonl(const fs::path& p) {
  std::vector<json> out;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line)) out.push_back(json::parse(line));
  return out;
}

bool Healthy(const std::string& url) {
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, (url + "/health").c_str());
  curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
  long code = 0;
  const bool ok = curl_easy_perform(c) == CURLE_OK &&
                  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200;
  curl_easy_cleanup(c);
  return ok;
}

struct Cmd {
  int code;
  std::string out;
};

Cmd Mxserve(const std::string& args) {
  const std::string cmd = std::string(MXSERVE_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// One server for the whole suite.
class EvalE2e : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(kWork);
    const std::string log = (kWork / "serve.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      if (f == nullptr || dup2(fileno(stderr), STDOUT_FILENO) < 0) _exit(127);
      const std::string model = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";
      execl(MXSERVE_BIN, "mxserve", "--threads", "1", "serve", model.c_str(), "--served-model-name",
            "arith", "--host", "127.0.0.1", "--port", "0", nullptr);
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      if (url_.empty()) {
        const std::string text = ReadAll(log);
        const std::string key = "listening on http://127.0.0.1:";
        const size_t at = text.find(key);
        if (at != std::string::npos) {
          const int port = std::atoi(text.c_str() + at + key.size());
          if (port > 0) url_ = "http://127.0.0.1:" + std::to_string(port);
        }
      }
      if (!url_.empty() && Healthy(url_)) return;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    start_error_ = "mxserve serve did not become healthy:\n" + ReadAll(log);
  }

  static void TearDownTestSuite() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    fs::remove_all(kWork);
  }

  void SetUp() override { ASSERT_TRUE(start_error_.empty()) << start_error_; }

  static pid_t pid_;
  static std::string url_;
  static std::string start_error_;
};

pid_t EvalE2e::pid_ = -1;
std::string EvalE2e::url_;
std::string EvalE2e::start_error_;

// Every record's verdict follows from its output; the summary adds the records up.
void ExpectConsistent(const std::vector<json>& log, const json& summary) {
  int correct = 0;
  for (const json& e : log) {
    const std::string output = e["output"].get<std::string>();
    EXPECT_EQ(e["extracted"], NormalizeNumber(ExtractNumber(output))) << e.dump();
    EXPECT_EQ(e["correct"], e["extracted"] == e["gold"] && !e["gold"].get<std::string>().empty());
    EXPECT_GT(e["prompt_tokens"].get<int>(), 0);
    EXPECT_GT(e["completion_tokens"].get<int>(), 0);
    EXPECT_EQ(e["attempts"], 1);
    EXPECT_FALSE(e.contains("error")) << e.dump();
    correct += e["correct"].get<bool>() ? 1 : 0;
  }
  const int n = static_cast<int>(log.size());
  EXPECT_EQ(summary["num_examples"], n);
  EXPECT_EQ(summary["samples"], n);
  EXPECT_EQ(summary["correct"], correct);
  EXPECT_EQ(summary["errors"], 0);
  const double p = static_cast<double>(correct) / n;
  EXPECT_NEAR(summary["accuracy"].get<double>(), p, 1e-12);
  EXPECT_NEAR(summary["stderr"].get<double>(), std::sqrt(p * (1 - p) / n), 1e-12);
}

TEST_F(EvalE2e, ArithChatTenProblems) {
  const fs::path out = kWork / "arith.jsonl";
  Cmd r = Mxserve("eval arith --base-url " + url_ + " --model arith --num-examples 10 " +
                  "--concurrency 2 --no-progress --data " + MX_SOURCE_DIR +
                  "/tests/data/arith/heldout.jsonl --output " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("arith: "), std::string::npos) << r.out;
  const std::vector<json> log = ReadJsonl(out);
  ASSERT_EQ(log.size(), 10u);
  auto heldout =
      mx::eval::LoadQaJsonl(std::string(MX_SOURCE_DIR) + "/tests/data/arith/heldout.jsonl");
  ASSERT_TRUE(heldout.ok());
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i]["example"], i);
    EXPECT_EQ(log[i]["id"], (*heldout)[i].id);
    EXPECT_EQ(log[i]["gold"], (*heldout)[i].gold);
    EXPECT_EQ(log[i]["prompt"],
              json::array({{{"role", "user"}, {"content", (*heldout)[i].question}}}));
    // The model was trained to end with "#### N": its format, at least, must survive serving.
    EXPECT_NE(log[i]["output"].get<std::string>().find("#### "), std::string::npos)
        << log[i].dump();
  }
  const json summary = json::parse(ReadAll(kWork / "arith.summary.json"));
  EXPECT_EQ(summary["task"], "arith");
  EXPECT_EQ(summary["model"], "arith");
  EXPECT_EQ(summary["endpoint"], "chat");
  ExpectConsistent(log, summary);

  // A run compared with itself: Δ = 0, within.
  const std::string s = (kWork / "arith.summary.json").string();
  Cmd c = Mxserve("eval compare " + s + " " + s + " --base-label bf16 --quant-label same");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("| +0.0 |"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("| yes |"), std::string::npos) << c.out;
}

TEST_F(EvalE2e, Gsm8kCompletionsOneShot) {
  const fs::path out = kWork / "gsm8k.jsonl";
  Cmd r = Mxserve("eval gsm8k --base-url " + url_ + " --model arith --endpoint completions " +
                  "--data " MX_SHARED_DIR "/datasets/gsm8k --num-examples 3 --num-shots 1 " +
                  "--max-tokens 24 --no-progress --output " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<json> log = ReadJsonl(out);
  ASSERT_EQ(log.size(), 3u);
  for (const json& e : log) {
    ASSERT_TRUE(e["prompt"].is_string());
    EXPECT_EQ(e["prompt"].get<std::string>().rfind("Question: Natalia sold clips", 0), 0u);
    EXPECT_LE(e["completion_tokens"].get<int>(), 24);
  }
  const json summary = json::parse(ReadAll(kWork / "gsm8k.summary.json"));
  EXPECT_EQ(summary["endpoint"], "completions");
  EXPECT_EQ(summary["num_shots"], 1);
  ExpectConsistent(log, summary);
}

TEST_F(EvalE2e, BadDataNamesFileAndLine) {
  const fs::path bad = kWork / "bad.jsonl";
  std::ofstream(bad) << "{\"question\": \"q\", \"answer\": \"#### 1\"}\n{\"question\": \"q\"}\n";
  Cmd r = Mxserve("eval arith --base-url " + url_ + " --data " + bad.string() + " --output " +
                  (kWork / "never.jsonl").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(bad.string() + ":2: missing \"answer\""), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(kWork / "never.jsonl"));
}

}  // namespace
