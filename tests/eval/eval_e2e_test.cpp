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

#include "../common/serve_process.h"
#include "eval/datasets.h"
#include "eval/extract.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using mx::eval::ExtractNumber;
using mx::eval::NormalizeNumber;

const fs::path kWork = fs::temp_directory_path() / ("mx-eval-e2e-" + std::to_string(::getpid()));

using mx::e2e::Slurp;

std::vector<json> ReadJsonl(const fs::path& p) {
  std::vector<json> out;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line)) out.push_back(json::parse(line));
  return out;
}

using mx::e2e::Cmd;

Cmd Mxserve(const std::string& args) {
  return mx::e2e::RunCommand(MXSERVE_BIN, args, kWork / "cmd.stderr");
}

// One server for the whole suite.
class EvalE2e : public mx::e2e::ServedSuite<EvalE2e> {
 public:
  static fs::path WorkDir() { return kWork; }
  static std::vector<std::string> ServeArgs() {
    return {"--threads",
            "1",
            "serve",
            std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m",
            "--served-model-name",
            "arith",
            "--host",
            "127.0.0.1",
            "--port",
            "0"};
  }
};

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
  const json summary = json::parse(Slurp(kWork / "arith.summary.json"));
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
  const json summary = json::parse(Slurp(kWork / "gsm8k.summary.json"));
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
