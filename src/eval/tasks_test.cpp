// The tasks end to end against the load generator's mock server with scripted replies: the
// scores, the per-example log and the summary must agree with what the server was told to
// answer, retries must absorb transient errors, and persistent ones must be counted wrong and
// reported.
#include "eval/tasks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "eval/datasets.h"
#include "loadgen/mock_server.h"

namespace mx::eval {
namespace {

using json = nlohmann::json;

const char* kGsm8kTest = MX_SHARED_DIR "/datasets/gsm8k/test.jsonl";
const char* kGsm8kTrain = MX_SHARED_DIR "/datasets/gsm8k/train.jsonl";

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".jsonl"))
      .string();
}

std::vector<json> ReadJsonl(const std::string& path) {
  std::ifstream f(path);
  std::vector<json> out;
  std::string line;
  while (std::getline(f, line)) out.push_back(json::parse(line));
  return out;
}

// The question a request asks: the last chat message, or the last "Question:" of the text.
std::string QuestionOf(const json& req) {
  if (req.contains("messages")) return req["messages"].back()["content"].get<std::string>();
  std::string p = req["prompt"].get<std::string>();
  const size_t q = p.rfind("Question: ");
  return p.substr(q + 10, p.rfind("\nAnswer:") - q - 10);
}

// Serves the gsm8k test split: a correct worked answer for questions at even positions, a
// wrong one (gold + 1) for odd ones, and records every body it got.
struct ScriptedGsm8k {
  std::vector<QaExample> test = *LoadQaJsonl(kGsm8kTest);
  std::map<std::string, int> index;
  std::mutex mu;
  std::vector<json> bodies;

  ScriptedGsm8k() {
    for (size_t i = 0; i < test.size(); ++i) index.emplace(test[i].question, static_cast<int>(i));
  }
  std::string Reply(const std::string& body) {
    json req = json::parse(body);
    {
      std::lock_guard<std::mutex> l(mu);
      bodies.push_back(req);
    }
    const int i = index.at(QuestionOf(req));
    if (i % 2 == 0) return "Some steps, 3 + 4 = 7.\n#### " + test[i].gold + "\nQuestion: 99";
    return "I think it is " + std::to_string(std::stoll(test[i].gold) + 1) + ".";
  }
};

std::unique_ptr<loadgen::MockServer> Start(loadgen::MockServerOptions o) {
  o.ttft_ms = 1;
  o.itl_ms = 0;
  auto s = loadgen::MockServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

TaskOptions Gsm8kOptions(const loadgen::MockServer& server, const std::string& out) {
  TaskOptions t;
  t.task = "gsm8k";
  t.server.base_url = server.base_url();
  t.server.model = "mock";
  t.server.progress = false;
  t.server.retry_backoff_s = 0.01;
  t.server.concurrency = 3;
  t.data = kGsm8kTest;
  t.train_data = kGsm8kTrain;
  t.num_examples = 10;
  t.num_shots = 2;
  t.output = out;
  return t;
}

// Without an output path the task writes no file at all (the working directory stays clean)
// and still returns the whole summary; with only a summary path, only the summary is written.
TEST(Tasks, FindUpwardsLooksInTheFolderAndItsParents) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("find-upwards-" + std::to_string(::getpid()));
  fs::create_directories(root / "build" / "src" / "cli");
  fs::create_directories(root / "tests" / "data");
  std::ofstream(root / "tests" / "data" / "x.jsonl") << "{}\n";
  EXPECT_EQ(FindUpwards(root / "build" / "src" / "cli", "tests/data/x.jsonl"),
            (root / "tests/data/x.jsonl").string());
  EXPECT_EQ(FindUpwards(root, "tests/data/x.jsonl"), (root / "tests/data/x.jsonl").string());
  EXPECT_EQ(FindUpwards(root / "build", "tests/data/missing.jsonl"), "");
  fs::remove_all(root);
}

TEST(Tasks, WritesFilesOnlyWhereTold) {
  ScriptedGsm8k script;
  loadgen::MockServerOptions so;
  so.reply = [&](const std::string& b) { return script.Reply(b); };
  auto server = Start(so);
  const std::filesystem::path dir = TempPath("no-output-dir");
  std::filesystem::create_directories(dir);
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  TaskOptions t = Gsm8kOptions(*server, "");
  auto r = RunQaTask(t);
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["num_examples"], 10);
  EXPECT_EQ((*r)["output"], "");
  EXPECT_EQ((*r)["summary"], "");
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  t.summary = (dir / "only.summary.json").string();
  ASSERT_TRUE(RunQaTask(t).ok());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  EXPECT_TRUE(std::filesystem::exists(t.summary));
  std::filesystem::remove_all(dir);
}

TEST(Tasks, Gsm8kScoresLogsAndSummaryAgree) {
  ScriptedGsm8k script;
  loadgen::MockServerOptions so;
  so.reply = [&](const std::string& b) { return script.Reply(b); };
  // The first two requests fail with 500 and 429: retried, then answered.
  so.fault = [](int k) { return k == 0 ? "http_500" : k == 1 ? "http_429" : ""; };
  auto server = Start(so);
  const std::string out = TempPath("gsm8k-log");
  TaskOptions t = Gsm8kOptions(*server, out);
  t.sampling.chat_template_kwargs = {{"enable_thinking", false}};
  auto r = RunQaTask(t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json& s = *r;
  EXPECT_EQ(s["num_examples"], 10);
  EXPECT_EQ(s["correct"], 5);
  EXPECT_DOUBLE_EQ(s["accuracy"].get<double>(), 0.5);
  EXPECT_NEAR(s["stderr"].get<double>(), std::sqrt(0.25 / 10), 1e-12);
  EXPECT_EQ(s["errors"], 0);
  EXPECT_EQ(s["retries"], 2);
  EXPECT_EQ(s["protocol"], "2-shot chat, greedy, exact match of the final number");
  EXPECT_EQ(server->requests_seen(), 12);

  // The summary on disk is the one returned, beside the log.
  std::ifstream sf(DefaultSummaryPath(out));
  ASSERT_TRUE(sf.good());
  EXPECT_EQ(json::parse(sf), s);

  std::vector<json> log = ReadJsonl(out);
  ASSERT_EQ(log.size(), 10u);
  const std::vector<QaExample> train = *LoadQaJsonl(kGsm8kTrain);
  int correct = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    const json& e = log[i];
    EXPECT_EQ(e["example"], i);
    EXPECT_EQ(e["gold"], script.test[i].gold);
    EXPECT_EQ(e["correct"], i % 2 == 0) << e.dump();
    EXPECT_EQ(e["correct"], e["extracted"] == e["gold"]);
    correct += e["correct"].get<bool>() ? 1 : 0;
    // Two shots from the start of the train split, then the question.
    ASSERT_EQ(e["prompt"].size(), 5u);
    EXPECT_EQ(e["prompt"][0]["content"], train[0].question);
    EXPECT_EQ(e["prompt"][1]["role"], "assistant");
    EXPECT_EQ(e["prompt"][3]["content"], train[1].answer);
    EXPECT_EQ(e["prompt"][4]["content"], script.test[i].question);
    EXPECT_FALSE(e.contains("error"));
  }
  EXPECT_EQ(correct, s["correct"]);
  for (const json& b : script.bodies) {
    EXPECT_EQ(b["temperature"], 0.0);
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["chat_template_kwargs"]["enable_thinking"], false);
    EXPECT_FALSE(b.contains("stop"));
  }
  std::filesystem::remove(out);
  std::filesystem::remove(DefaultSummaryPath(out));
}

TEST(Tasks, CompletionsPromptAndSeeds) {
  ScriptedGsm8k script;
  loadgen::MockServerOptions so;
  so.reply = [&](const std::string& b) { return script.Reply(b); };
  auto server = Start(so);
  const std::string out = TempPath("gsm8k-completions");
  TaskOptions t = Gsm8kOptions(*server, out);
  t.server.endpoint = loadgen::Endpoint::kCompletions;
  t.num_examples = 4;
  t.num_shots = 1;
  t.seeds = 3;
  t.seed = 7;
  t.sampling.temperature = 0.8;
  t.summary = TempPath("gsm8k-completions-summary");
  auto r = RunQaTask(t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["samples"], 12);
  EXPECT_EQ((*r)["correct"], 6);
  ASSERT_EQ((*r)["per_seed"].size(), 3u);
  EXPECT_EQ((*r)["per_seed"][2]["seed"], 9);
  EXPECT_DOUBLE_EQ((*r)["per_seed"][2]["accuracy"].get<double>(), 0.5);
  EXPECT_TRUE(std::filesystem::exists(t.summary));
  std::vector<json> log = ReadJsonl(out);
  ASSERT_EQ(log.size(), 12u);
  const QaExample shot = (*LoadQaJsonl(kGsm8kTrain))[0];
  EXPECT_EQ(log[0]["prompt"], "Question: " + shot.question + "\nAnswer: " + shot.answer +
                                  "\n\nQuestion: " + script.test[0].question + "\nAnswer:");
  std::set<int64_t> seeds;
  for (const json& b : script.bodies) {
    seeds.insert(b["seed"].get<int64_t>());
    EXPECT_EQ(b["stop"], json::array({"Question:", "</s>", "<|im_end|>"}));
    EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.8);
  }
  EXPECT_EQ(seeds, (std::set<int64_t>{7, 8, 9}));
  std::filesystem::remove(out);
  std::filesystem::remove(t.summary);
}

TEST(Tasks, PersistentErrorsAreCountedWrongAndReported) {
  ScriptedGsm8k script;
  loadgen::MockServerOptions so;
  so.reply = [&](const std::string& b) { return script.Reply(b); };
  so.fault = [](int k) { return k >= 3 ? "http_500" : ""; };  // the server breaks after 3
  auto server = Start(so);
  const std::string out = TempPath("gsm8k-errors");
  TaskOptions t = Gsm8kOptions(*server, out);
  t.num_examples = 6;
  t.server.concurrency = 1;
  t.server.max_retries = 2;
  auto r = RunQaTask(t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["errors"], 3);
  EXPECT_EQ((*r)["errors_by_kind"]["http_500"], 3);
  EXPECT_EQ((*r)["correct"], 2);  // examples 0 and 2 answered right; 4 never answered
  EXPECT_EQ(server->requests_seen(), 3 + 3 * 3);
  std::vector<json> log = ReadJsonl(out);
  ASSERT_EQ(log.size(), 6u);
  for (int i = 3; i < 6; ++i) {
    EXPECT_EQ(log[i]["error_kind"], "http_500");
    EXPECT_EQ(log[i]["attempts"], 3);
    EXPECT_EQ(log[i]["correct"], false);
  }
  EXPECT_EQ(log[0]["attempts"], 1);
  std::filesystem::remove(out);
  std::filesystem::remove(DefaultSummaryPath(out));
}

TEST(Tasks, RetryableKinds) {
  for (const char* k : {"http_500", "http_503", "http_429", "http_408", "connect", "timeout",
                        "dropped", "malformed_sse", "server_error"}) {
    EXPECT_TRUE(IsRetryable(k)) << k;
  }
  for (const char* k : {"http_400", "http_404", "http_413"}) EXPECT_FALSE(IsRetryable(k)) << k;
}

TEST(Tasks, UnreachableServerIsReportedNotFatal) {
  const std::string out = TempPath("gsm8k-unreachable");
  TaskOptions t;
  t.task = "gsm8k";
  t.server.base_url = "http://127.0.0.1:1";  // nothing listens on port 1
  t.server.progress = false;
  t.server.max_retries = 1;
  t.server.retry_backoff_s = 0.01;
  t.data = kGsm8kTest;
  t.num_examples = 2;
  t.output = out;
  auto r = RunQaTask(t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["errors"], 2);
  EXPECT_EQ((*r)["errors_by_kind"]["connect"], 2);
  EXPECT_EQ((*r)["accuracy"], 0.0);
  std::filesystem::remove(out);
  std::filesystem::remove(DefaultSummaryPath(out));
}

TEST(Tasks, OptionErrorsNameTheFlag) {
  TaskOptions t;
  t.task = "gsm8k";
  t.data = kGsm8kTest;
  t.output = TempPath("never-written");
  t.num_shots = 3;
  EXPECT_NE(RunQaTask(t).status().message().find("--train-data"), std::string::npos);
  t.num_shots = 0;
  t.num_examples = 5000;
  EXPECT_NE(RunQaTask(t).status().message().find("has only 1319 records"), std::string::npos);
  t.num_examples = 1;
  t.seeds = 0;
  EXPECT_NE(RunQaTask(t).status().message().find("--seeds 0"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(t.output));
}

TEST(Tasks, McqShufflesPerSeedAndScoresLetters) {
  const std::string data = TempPath("mcq-data");
  std::ofstream(data) << R"({"question": "Q0", "choices": ["right0", "w", "x", "y"], "answer": "A"}
{"question": "Q1", "choices": ["w", "right1", "x", "y"], "answer": "B"}
{"question": "Q2", "choices": ["w", "x", "y", "right2"], "answer": "D"}
{"question": "Q3", "choices": ["w", "x", "right3"], "answer": "C"}
)";
  // Answers Q0..Q2 with the letter the correct choice got; Q3 always with "A".
  loadgen::MockServerOptions so;
  so.reply = [](const std::string& body) {
    const std::string text = json::parse(body)["messages"][0]["content"].get<std::string>();
    if (text.find("\n\nQ3\n") != std::string::npos) return std::string("Answer: A");
    const size_t at = text.find(") right");
    return "Let me think.\nAnswer: " + text.substr(at - 1, 1);
  };
  auto server = Start(so);
  const std::string out = TempPath("mcq-log");
  TaskOptions t;
  t.task = "mcq";
  t.server.base_url = server->base_url();
  t.server.progress = false;
  t.data = data;
  t.seeds = 4;
  t.sampling.temperature = 1.0;
  t.output = out;
  auto r = RunMcqTask(t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<json> log = ReadJsonl(out);
  ASSERT_EQ(log.size(), 16u);
  int q3_correct = 0;
  std::set<std::string> gold_letters_q0;
  for (const json& e : log) {
    const std::vector<int> order = e["order"].get<std::vector<int>>();
    const int example = e["example"].get<int>();
    const int original_answer = std::vector<int>{0, 1, 3, 2}[example];
    const std::string gold = e["gold"].get<std::string>();
    ASSERT_EQ(gold.size(), 1u);
    EXPECT_EQ(order[gold[0] - 'A'], original_answer) << e.dump();
    EXPECT_EQ(e["correct"], e["extracted"] == e["gold"]);
    if (example < 3) {
      EXPECT_TRUE(e["correct"].get<bool>()) << e.dump();
    }
    if (example == 3) q3_correct += e["correct"].get<bool>() ? 1 : 0;
    if (example == 0) gold_letters_q0.insert(gold);
  }
  EXPECT_GE(gold_letters_q0.size(), 2u);  // the shuffle moved the answer between seeds
  EXPECT_EQ((*r)["correct"], 12 + q3_correct);
  // Clustered SE over the per-question scores 1, 1, 1, q3_correct / 4.
  const double s3 = q3_correct / 4.0, mean = (3 + s3) / 4;
  const double var = (3 * (1 - mean) * (1 - mean) + (s3 - mean) * (s3 - mean)) / 4;
  EXPECT_NEAR((*r)["stderr"].get<double>(), std::sqrt(var / 4), 1e-12);
  std::filesystem::remove(out);
  std::filesystem::remove(DefaultSummaryPath(out));
  std::filesystem::remove(data);
}

}  // namespace
}  // namespace mx::eval
