// `eval tools`: the simulated store's tools (malformed calls included), the judge, pass^k, and
// whole runs against the mock server over chat completions and Anthropic Messages, with a
// scripted agent that solves some tasks and fails others in known ways (acts against the
// policy, stops early, ignores ownership; on odd seeds in chat, forgets to name the order),
// so the scores, pass^k and standard error are known exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "eval/tasks.h"
#include "eval/tool_env.h"
#include "eval/tool_episode.h"
#include "loadgen/mock_server.h"

namespace mx::eval {
namespace {

using json = nlohmann::json;
using loadgen::MockReply;
using loadgen::MockToolCall;

TEST(ToolEnv, ToolsChangeTheStoreOnlyWhenAllowed) {
  Store s = InitialStore();
  const Store initial = s;
  EXPECT_NE(RunTool(s, "find_account_by_email", R"({"email":"BOB@example.com"})").find("A-200"),
            std::string::npos);
  EXPECT_NE(RunTool(s, "cancel_order", R"({"order_id":"O-1002"})").find("only pending"),
            std::string::npos);
  EXPECT_NE(RunTool(s, "refund_order", R"({"order_id":"O-1003"})").find("only delivered"),
            std::string::npos);
  EXPECT_TRUE(s == initial);
  EXPECT_NE(RunTool(s, "cancel_order", R"({"order_id":"O-1003"})").find("cancelled"),
            std::string::npos);
  EXPECT_EQ(s.orders["O-1003"].status, "cancelled");
  EXPECT_NE(RunTool(s, "refund_order", R"({"order_id":"O-1001"})").find("\"refunded\":true"),
            std::string::npos);
  EXPECT_NE(RunTool(s, "refund_order", R"({"order_id":"O-1001"})").find("already refunded"),
            std::string::npos);
  const json orders = json::parse(RunTool(s, "list_orders", R"({"account_id":"A-200"})"));
  EXPECT_EQ(orders["orders"].size(), 3u);
  EXPECT_EQ(orders["orders"][0]["total"], "219.00");
}

TEST(ToolEnv, MalformedCallsAreErrorResults) {
  Store s = InitialStore();
  const Store initial = s;
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{
           {"cancel_order", "{not json"},
           {"cancel_order", "[1,2]"},
           {"cancel_order", R"({"order_id":7})"},
           {"cancel_order", R"({})"},
           {"cancel_order", R"({"order_id":"O-9999"})"},
           {"update_email", R"({"account_id":"A-100","new_email":"no-at-sign"})"},
           {"update_email", R"({"account_id":"A-100"})"},
           {"list_orders", R"({"account_id":"A-999"})"},
           {"drop_tables", R"({})"}}) {
    const json r = json::parse(RunTool(s, name, args));
    EXPECT_TRUE(r.contains("error")) << name << " " << args;
  }
  EXPECT_TRUE(s == initial);
}

TEST(ToolEnv, JudgeNeedsStateAnswerAndRefusal) {
  const std::vector<ToolTask> tasks = ToolTasks();
  ASSERT_EQ(tasks.size(), 10u);
  const ToolTask& cancel = tasks[1];  // cancel_pending
  Store s = InitialStore();
  EXPECT_EQ(Judge(cancel, s, {"O-2001 is cancelled"}).reasons, std::vector<std::string>{"state"});
  s.orders["O-2001"].status = "cancelled";
  EXPECT_TRUE(Judge(cancel, s, {"o-2001 is cancelled"}).success);
  EXPECT_EQ(Judge(cancel, s, {"done"}).reasons, std::vector<std::string>{"missing 'O-2001'"});
  const ToolTask& refuse = tasks[2];  // cancel_shipped
  EXPECT_TRUE(Judge(refuse, InitialStore(), {"Sorry, I can't cancel a shipped order."}).success);
  EXPECT_EQ(Judge(refuse, InitialStore(), {"Done."}).reasons,
            std::vector<std::string>{"no refusal"});
  EXPECT_EQ(Judge(refuse, InitialStore(), {}).reasons, std::vector<std::string>{"no refusal"});
}

TEST(ToolEnv, PassHatK) {
  // Three tasks, four trials: 4, 2 and 0 successes.
  const std::vector<int> c = {4, 2, 0};
  EXPECT_DOUBLE_EQ(PassHatK(c, 4, 1), (1.0 + 0.5 + 0) / 3);
  EXPECT_DOUBLE_EQ(PassHatK(c, 4, 2), (1.0 + 1.0 / 6) / 3);  // C(2,2)/C(4,2)
  EXPECT_DOUBLE_EQ(PassHatK(c, 4, 4), 1.0 / 3);
  EXPECT_EQ(PassHatK(c, 4, 5), 0);
  EXPECT_EQ(PassHatK({}, 4, 1), 0);
}

// The conversation as the scripted agent sees it, whichever API carried it.
struct AgentView {
  std::string first_user;
  int assistant_turns = 0;
  int64_t seed = -1;
};

AgentView ReadConversation(const std::string& body) {
  const json j = json::parse(body);
  AgentView s;
  s.seed = j.value("seed", int64_t{-1});
  for (const json& m : j["messages"]) {
    if (m["role"] == "assistant") ++s.assistant_turns;
    if (m["role"] == "user" && s.first_user.empty() && m["content"].is_string()) {
      s.first_user = m["content"];
    }
  }
  return s;
}

MockReply Call(int step, const std::string& name, const std::string& args) {
  return MockReply{"", {MockToolCall{"t" + std::to_string(step), name, args}}};
}
MockReply Say(const std::string& text) { return MockReply{text, {}}; }

// Solves order_status, cancel_pending, update_email (after a malformed call), two_turns,
// total_spent and unknown_customer; refund_delivered except on odd chat seeds; fails
// cancel_shipped (no refusal), cancel_all_pending (stops early: state) and other_account
// (ignores ownership: state and no refusal).
MockReply Agent(const std::string& body) {
  const AgentView s = ReadConversation(body);
  const int k = s.assistant_turns;
  auto has = [&](const char* x) { return s.first_user.find(x) != std::string::npos; };
  auto find = [&](const char* email) {
    return Call(k, "find_account_by_email", json{{"email", email}}.dump());
  };
  auto order = [&](const char* tool, const char* id) {
    return Call(k, tool, json{{"order_id", id}}.dump());
  };
  if (has("status of my order O-1002")) {
    if (k == 0) return find("alice@example.com");
    if (k == 1) return order("get_order", "O-1002");
    return Say("Your order O-1002 is shipped.");
  }
  if (has("cancel my order O-2001")) {
    if (k == 0) return find("bob@example.com");
    if (k == 1) return order("cancel_order", "O-2001");
    return Say("Order O-2001 is cancelled.");
  }
  if (has("Cancel order O-1002")) {
    if (k == 0) return find("alice@example.com");
    if (k == 1) return order("cancel_order", "O-1002");
    return Say("Done, it is cancelled.");
  }
  if (has("change it to carol.diaz")) {
    if (k == 0) return find("carol@example.com");
    if (k == 1) return Call(k, "update_email", "{not json");
    if (k == 2) {
      return Call(k, "update_email",
                  R"({"account_id":"A-300","new_email":"carol.diaz@example.org"})");
    }
    return Say("Your email is now carol.diaz@example.org.");
  }
  if (has("all of my pending orders")) {
    if (k == 0) return find("bob@example.com");
    if (k == 1) return Call(k, "list_orders", R"({"account_id":"A-200"})");
    if (k == 2) return order("cancel_order", "O-2001");
    return Say("Cancelled O-2001 and O-2002.");
  }
  if (has("Cancel order O-2002 for me")) {
    if (k == 0) return find("carol@example.com");
    if (k == 1) return order("cancel_order", "O-2002");
    return Say("Order O-2002 is cancelled.");
  }
  if (has("refund my desk lamp")) {
    if (k == 0) return find("alice@example.com");
    if (k == 1) return order("refund_order", "O-1001");
    return Say(s.seed % 2 == 1 ? "Refunded." : "Order O-1001 is refunded.");
  }
  if (has("Which of my orders have been delivered")) {
    if (k == 0) return find("bob@example.com");
    if (k == 1) return Call(k, "list_orders", R"({"account_id":"A-200"})");
    if (k == 2) return Say("Your delivered order is O-2003 (mouse).");
    if (k == 3) return order("refund_order", "O-2003");
    return Say("Refunded.");
  }
  if (has("total of all my orders")) {
    if (k == 0) return find("alice@example.com");
    if (k == 1) return Call(k, "list_orders", R"({"account_id":"A-100"})");
    return Say("Your orders total 140.00.");
  }
  if (k == 0) return find("dave@example.com");
  return Say("Sorry, I cannot find an account with that email, so I cannot cancel anything.");
}

std::unique_ptr<loadgen::MockServer> StartToolsMock(loadgen::MockServerOptions o) {
  auto s = loadgen::MockServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

TaskOptions ToolsOptions(const loadgen::MockServer& server, loadgen::Endpoint api,
                         const std::string& out) {
  TaskOptions t;
  t.task = "tools";
  t.server.base_url = server.base_url();
  t.server.model = "mock";
  t.server.endpoint = api;
  t.server.progress = false;
  t.server.retry_backoff_s = 0.01;
  t.seeds = 2;
  t.output = out;
  return t;
}

std::vector<json> LogLines(const std::string& path) {
  std::vector<json> v;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) v.push_back(json::parse(line));
  return v;
}

class ToolsApis : public ::testing::TestWithParam<loadgen::Endpoint> {};

TEST_P(ToolsApis, ScoresPassHatKAndLogsAreExact) {
  const bool chat = GetParam() == loadgen::Endpoint::kChat;
  loadgen::MockServerOptions so;
  so.ttft_ms = 1;
  so.itl_ms = 1;
  so.script = Agent;
  so.fault = [](int k) { return k == 3 ? "http_500" : ""; };  // retried
  auto server = StartToolsMock(so);
  const std::string out =
      (std::filesystem::temp_directory_path() /
       ("tools-" + std::to_string(::getpid()) + (chat ? "-chat" : "-msg") + ".jsonl"))
          .string();
  auto r = RunToolsTask(ToolsOptions(*server, GetParam(), out), 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json& s = *r;
  EXPECT_EQ(s["task"], "tools");
  EXPECT_EQ(s["num_examples"], 10);
  EXPECT_EQ(s["seeds"], 2);
  EXPECT_EQ(s["errors"], 0);
  EXPECT_EQ(s["retries"], 1);
  EXPECT_EQ(s["endpoint"], chat ? "chat" : "messages");
  // Per task: six always solved, three never; refund_delivered on even seeds only in chat
  // (Messages carries no seed, so there it is always solved).
  std::vector<double> score = {1, 1, 0, 1, 0, 0, chat ? 0.5 : 1.0, 1, 1, 1};
  double mean = 0;
  for (double x : score) mean += x / 10;
  double var = 0;
  for (double x : score) var += (x - mean) * (x - mean) / 10;
  EXPECT_DOUBLE_EQ(s["accuracy"].get<double>(), mean);
  EXPECT_NEAR(s["stderr"].get<double>(), std::sqrt(var / 10), 1e-12);
  EXPECT_EQ(s["correct"], chat ? 13 : 14);
  EXPECT_DOUBLE_EQ(s["pass_hat_k"]["1"].get<double>(), mean);
  EXPECT_DOUBLE_EQ(s["pass_hat_k"]["2"].get<double>(), chat ? 0.6 : 0.7);
  EXPECT_EQ(s["ends"]["answered"], 20);

  const std::vector<json> log = LogLines(out);
  ASSERT_EQ(log.size(), 20u);
  std::map<std::string, json> first;  // seed 0's record per task
  for (const json& rec : log) {
    if (rec["seed"] == 0) first[rec["id"]] = rec;
  }
  EXPECT_EQ(first["cancel_shipped"]["reasons"], json::array({"no refusal"}));
  EXPECT_EQ(first["cancel_all_pending"]["reasons"], json::array({"state"}));
  EXPECT_EQ(first["cancel_all_pending"]["final_state"]["orders"]["O-2002"]["status"], "pending");
  EXPECT_EQ(first["other_account"]["reasons"], json::array({"state", "no refusal"}));
  EXPECT_TRUE(first["update_email"]["success"].get<bool>());
  EXPECT_EQ(first["update_email"]["tool_calls"], 3);  // the malformed call got an error result
  EXPECT_TRUE(first["two_turns"]["success"].get<bool>());
  EXPECT_EQ(first["two_turns"]["answers"].size(), 2u);
  EXPECT_EQ(first["two_turns"]["steps"], 5);
  EXPECT_FALSE(first["order_status"].contains("final_state"));
  // The transcript holds the tool results the agent saw.
  const std::string transcript = first["cancel_shipped"]["messages"].dump();
  EXPECT_NE(transcript.find("only pending orders can be cancelled"), std::string::npos);
  std::filesystem::remove(out);
  std::filesystem::remove(DefaultSummaryPath(out));
}

INSTANTIATE_TEST_SUITE_P(Apis, ToolsApis,
                         ::testing::Values(loadgen::Endpoint::kChat, loadgen::Endpoint::kMessages),
                         [](const auto& info) {
                           return std::string(info.param == loadgen::Endpoint::kChat ? "chat"
                                                                                     : "messages");
                         });

TEST(Tools, AnEpisodeEndsAfterMaxSteps) {
  loadgen::MockServerOptions so;
  so.ttft_ms = 1;
  so.itl_ms = 1;
  so.script = [](const std::string& body) {
    return Call(ReadConversation(body).assistant_turns, "get_order", R"({"order_id":"O-1001"})");
  };
  auto server = StartToolsMock(so);
  TaskOptions t = ToolsOptions(*server, loadgen::Endpoint::kChat, "");
  t.seeds = 1;
  t.num_examples = 2;
  auto r = RunToolsTask(t, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["ends"]["max_steps"], 2);
  EXPECT_EQ((*r)["correct"], 0);
  EXPECT_EQ(server->requests_seen(), 2 * 3);
  EXPECT_FALSE(RunToolsTask(t, 0).ok());
  EXPECT_FALSE(RunToolsTask(t, kMaxToolSteps + 1).ok());
  t.server.endpoint = loadgen::Endpoint::kCompletions;
  EXPECT_FALSE(RunToolsTask(t, 3).ok());
}

TEST(Tools, AnthropicBodyGathersToolResults) {
  const std::vector<ToolTask> tasks = ToolTasks();
  Episode e = StartEpisode(tasks[0], 5);
  Response r;
  r.ok = true;
  r.attempts = 1;
  r.reasoning = "think";
  r.tool_calls = {{"a", "find_account_by_email", R"({"email":"alice@example.com"})"},
                  {"", "get_order", R"({"order_id":"O-1002"})"}};
  Advance(e, r, 12);
  EXPECT_FALSE(e.done);
  EXPECT_EQ(e.tool_calls, 2);
  Sampling sp;
  const json m = json::parse(EpisodeBody(e, loadgen::Endpoint::kMessages, "x", sp));
  EXPECT_EQ(m["system"], Policy());
  ASSERT_EQ(m["messages"].size(), 3u);
  EXPECT_EQ(m["messages"][1]["content"][0]["type"], "thinking");
  EXPECT_EQ(m["messages"][1]["content"][1]["type"], "tool_use");
  EXPECT_EQ(m["messages"][1]["content"][2]["id"], "call_1_1");  // an id made for the id-less call
  EXPECT_EQ(m["messages"][2]["content"].size(), 2u);
  EXPECT_EQ(m["messages"][2]["content"][1]["tool_use_id"], "call_1_1");
  EXPECT_EQ(m["tools"][0]["input_schema"]["type"], "object");
  const json c = json::parse(EpisodeBody(e, loadgen::Endpoint::kChat, "x", sp));
  EXPECT_EQ(c["messages"].size(), 5u);  // system, user, assistant, tool, tool
  EXPECT_EQ(c["seed"], 5);
  EXPECT_EQ(c["tools"][0]["type"], "function");
}

}  // namespace
}  // namespace mx::eval
