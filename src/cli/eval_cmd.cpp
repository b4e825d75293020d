// `mxserve eval gsm8k|arith|mcq|tools|compare`: accuracy of any OpenAI-compatible server
// (mxserve serve, sglang, vLLM) on GSM8K, the bundled model's held-out arithmetic,
// user-supplied multiple-choice sets and scripted tool-use tasks (also over Anthropic
// Messages), and the baseline-vs-quantized table. The protocol (prompts,
// extraction, standard errors) lives in src/eval; this file maps flags to it and prints.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/verb.h"
#include "eval/compare.h"
#include "eval/tasks.h"
#include "eval/tool_episode.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct EvalArgs {
  eval::TaskOptions task;
  std::string endpoint = "chat";
  std::string chat_template_kwargs;
  bool no_progress = false;
  bool no_shuffle = false;
  bool tools = false;  // --api chat|messages instead of --endpoint
  int max_steps = 12;
};

void AddTaskOptions(CLI::App* sub, EvalArgs& a) {
  eval::TaskOptions& t = a.task;
  sub->add_option("--base-url", t.server.base_url, "server URL")->capture_default_str();
  sub->add_option("--model", t.server.model, "model name sent in requests")->capture_default_str();
  sub->add_option("--api-key", t.server.api_key, "sent as a Bearer token");
  if (a.tools) {
    sub->add_option("--api", a.endpoint, "chat (completions) | messages (Anthropic)")
        ->capture_default_str();
  } else {
    sub->add_option("--endpoint", a.endpoint, "chat | completions")->capture_default_str();
  }
  sub->add_option("--num-examples", t.num_examples, "the first N questions (0 = all)")
      ->capture_default_str();
  sub->add_option("--temperature", t.sampling.temperature, "sampling temperature (0 = greedy)")
      ->capture_default_str();
  sub->add_option("--seeds", t.seeds, "samples per question; seed s sends --seed + s")
      ->capture_default_str();
  sub->add_option("--seed", t.seed, "first sampling seed")->capture_default_str();
  sub->add_option("--max-tokens", t.sampling.max_tokens, "generation limit per answer")
      ->capture_default_str();
  sub->add_option("--concurrency", t.server.concurrency, "requests in flight")
      ->capture_default_str();
  sub->add_option("--request-timeout", t.server.request_timeout_s, "seconds per request")
      ->capture_default_str();
  sub->add_option("--max-retries", t.server.max_retries,
                  "retries of a request that failed with a server error")
      ->capture_default_str();
  sub->add_option("--retry-backoff", t.server.retry_backoff_s,
                  "seconds before the first retry, doubled for each next one")
      ->capture_default_str();
  sub->add_option("--chat-template-kwargs", a.chat_template_kwargs,
                  "JSON object sent as chat_template_kwargs (chat endpoint)");
  sub->add_option("--output", t.output,
                  "per-example log (JSONL) and, beside it, its summary; without it no file is "
                  "written");
  sub->add_option("--output-summary", t.summary,
                  "summary JSON (default: the --output path with .summary.json)");
  sub->add_flag("--no-progress", a.no_progress, "no progress line on stderr");
}

Status Finalize(EvalArgs& a) {
  eval::TaskOptions& t = a.task;
  if (a.endpoint == "chat") {
    t.server.endpoint = loadgen::Endpoint::kChat;
  } else if (a.endpoint == "completions" && !a.tools) {
    t.server.endpoint = loadgen::Endpoint::kCompletions;
  } else if (a.endpoint == "messages" && a.tools) {
    t.server.endpoint = loadgen::Endpoint::kMessages;
  } else if (a.tools) {
    return InvalidArgument("--api {}: expected chat or messages", a.endpoint);
  } else {
    return InvalidArgument("--endpoint {}: expected chat or completions", a.endpoint);
  }
  if (!a.chat_template_kwargs.empty()) {
    json k = json::parse(a.chat_template_kwargs, nullptr, false);
    if (k.is_discarded() || !k.is_object()) {
      return InvalidArgument("--chat-template-kwargs '{}': expected a JSON object",
                             a.chat_template_kwargs);
    }
    t.sampling.chat_template_kwargs = k;
  }
  t.server.progress = !a.no_progress;
  t.server.label = "eval " + t.task;
  t.shuffle = !a.no_shuffle;
  t.command = CommandLine();
  return Status::Ok();
}

int Report(const Result<json>& r) {
  if (!r.ok()) return Fail(r.status().message());
  const json& s = *r;
  std::printf("%s: %.1f%% ± %.1f%% (%d/%d correct, %s), %d request errors, %.0f s\n",
              s["task"].get<std::string>().c_str(), 100 * s["accuracy"].get<double>(),
              100 * s["stderr"].get<double>(), s["correct"].get<int>(), s["samples"].get<int>(),
              s["protocol"].get<std::string>().c_str(), s["errors"].get<int>(),
              s["duration_s"].get<double>());
  auto where = [](const json& path) {
    return path.get<std::string>().empty() ? std::string("not written (give --output FILE.jsonl)")
                                           : path.get<std::string>();
  };
  std::printf("log: %s\nsummary: %s\n", where(s["output"]).c_str(), where(s["summary"]).c_str());
  if (s["errors"].get<int>() > 0) {
    std::fprintf(stderr, "warning: %d requests failed after retries and were scored wrong: %s\n",
                 s["errors"].get<int>(), s["errors_by_kind"].dump().c_str());
  }
  if (s["errors"].get<int>() == s["samples"].get<int>()) {
    return Fail("every request failed (is a server listening at " +
                s["base_url"].get<std::string>() + "?)");
  }
  return 0;
}

// Report() plus the pass^k line.
int ReportTools(const Result<json>& r) {
  const int code = Report(r);
  if (r.ok()) {
    std::string line = "pass^k:";
    for (const auto& [k, v] : (*r)["pass_hat_k"].items()) {
      line += fmt::format(" k={} {:.1f}%", k, 100 * v.get<double>());
    }
    std::printf("%s\n", line.c_str());
  }
  return code;
}

int RunQa(EvalArgs& a) {
  eval::TaskOptions& t = a.task;
  if (auto st = Finalize(a); !st.ok()) return Fail(st.message());
  if (fs::is_directory(t.data)) {
    if (t.train_data.empty()) t.train_data = (fs::path(t.data) / "train.jsonl").string();
    t.data = (fs::path(t.data) / "test.jsonl").string();
  }
  return Report(eval::RunQaTask(t));
}

int RunCompare(const std::vector<std::string>& files, const std::string& base_label,
               const std::string& quant_label, const std::string& output_json) {
  if (files.size() < 2 || files.size() % 2 != 0) {
    return Fail(
        fmt::format("compare: give BASE.json QUANT.json pairs ({} files given)", files.size()));
  }
  std::vector<eval::CompareRow> rows;
  for (size_t i = 0; i < files.size(); i += 2) {
    auto b = eval::ReadSummary(files[i]);
    if (!b.ok()) return Fail(b.status().message());
    auto q = eval::ReadSummary(files[i + 1]);
    if (!q.ok()) return Fail(q.status().message());
    auto row = eval::Compare(*b, *q, files[i], files[i + 1]);
    if (!row.ok()) return Fail(row.status().message());
    rows.push_back(*row);
  }
  std::printf("%s", eval::FormatCompareTable(rows, base_label, quant_label).c_str());
  if (!output_json.empty()) {
    FILE* f = std::fopen(output_json.c_str(), "w");
    if (f == nullptr) return Fail(output_json + ": cannot open for writing");
    const std::string text = eval::CompareJson(rows, base_label, quant_label).dump(2) + "\n";
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) return Fail(output_json + ": write failed");
  }
  return 0;
}

VerbRun SetupEval(CLI::App& app) {
  auto* ev = app.add_subcommand("eval", "Accuracy of an OpenAI-compatible server");
  ev->require_subcommand(1);

  auto gsm = std::make_shared<EvalArgs>();
  gsm->task.task = "gsm8k";
  gsm->task.data = "../shared/datasets/gsm8k";
  gsm->task.num_shots = 5;
  auto* g = ev->add_subcommand("gsm8k", "GSM8K: few-shot from the train split, exact match");
  AddTaskOptions(g, *gsm);
  g->add_option("--data", gsm->task.data, "directory with test.jsonl/train.jsonl, or a JSONL file")
      ->capture_default_str();
  g->add_option("--train-data", gsm->task.train_data, "few-shot source (default DIR/train.jsonl)");
  g->add_option("--num-shots", gsm->task.num_shots, "the first K train records as shots")
      ->capture_default_str();

  auto ari = std::make_shared<EvalArgs>();
  ari->task.task = "arith";
  ari->task.data = eval::DefaultArithData();
  ari->task.sampling.max_tokens = 256;  // the longest held-out answer is 194 tokens
  ari->chat_template_kwargs = R"({"enable_thinking": false})";
  auto* r = ev->add_subcommand("arith", "The bundled model's 500 held-out arithmetic problems");
  AddTaskOptions(r, *ari);
  r->add_option("--data", ari->task.data, "GSM8K-format JSONL")->capture_default_str();
  r->add_option("--train-data", ari->task.train_data, "few-shot source (GSM8K-format JSONL)");
  r->add_option("--num-shots", ari->task.num_shots, "the first K --train-data records as shots")
      ->capture_default_str();
  r->get_option("--chat-template-kwargs")->default_str(ari->chat_template_kwargs);

  auto mcq = std::make_shared<EvalArgs>();
  mcq->task.task = "mcq";
  mcq->task.sampling.temperature = 1.0;
  mcq->task.sampling.max_tokens = 1024;
  mcq->task.seeds = 2;
  auto* m = ev->add_subcommand("mcq", "Multiple choice (GPQA-style): shuffled choices per seed");
  AddTaskOptions(m, *mcq);
  m->add_option("--data", mcq->task.data,
                "JSONL: {\"question\", \"choices\": [...], \"answer\": \"B\"} per line")
      ->required();
  m->add_flag("--no-shuffle", mcq->no_shuffle, "keep the choices in file order");

  auto tls = std::make_shared<EvalArgs>();
  tls->task.task = "tools";
  tls->tools = true;
  tls->task.sampling.temperature = 0.7;
  tls->task.sampling.max_tokens = 1024;
  tls->task.seeds = 4;
  auto* tl = ev->add_subcommand(
      "tools", "Tool use: scripted shop-support tasks over simulated tools, pass^k over seeds");
  AddTaskOptions(tl, *tls);
  tl->add_option("--max-steps", tls->max_steps,
                 fmt::format("requests per episode before it ends (1 to {})", eval::kMaxToolSteps))
      ->capture_default_str();

  struct CompareArgs {
    std::vector<std::string> files;
    std::string base_label = "base", quant_label = "quant", output_json;
  };
  auto cmp = std::make_shared<CompareArgs>();
  auto* c = ev->add_subcommand("compare", "Base vs quantized table from summary JSONs");
  c->add_option("summaries", cmp->files, "BASE.json QUANT.json [BASE2.json QUANT2.json ...]")
      ->required();
  c->add_option("--base-label", cmp->base_label, "column name")->capture_default_str();
  c->add_option("--quant-label", cmp->quant_label, "column name")->capture_default_str();
  c->add_option("--output-json", cmp->output_json, "also write the table as JSON");

  return [=]() -> int {
    if (g->parsed()) return RunQa(*gsm);
    if (r->parsed()) return RunQa(*ari);
    if (m->parsed()) {
      if (auto st = Finalize(*mcq); !st.ok()) return Fail(st.message());
      return Report(eval::RunMcqTask(mcq->task));
    }
    if (tl->parsed()) {
      if (auto st = Finalize(*tls); !st.ok()) return Fail(st.message());
      return ReportTools(eval::RunToolsTask(tls->task, tls->max_steps));
    }
    if (c->parsed())
      return RunCompare(cmp->files, cmp->base_label, cmp->quant_label, cmp->output_json);
    return Fail("eval: give gsm8k, arith, mcq, tools or compare");
  };
}

MX_REGISTER_VERB(eval, "eval", 55, SetupEval);

}  // namespace
}  // namespace mx::cli
