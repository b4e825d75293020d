#include "eval/tasks.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "eval/datasets.h"
#include "eval/extract.h"
#include "eval/scoring.h"
#include "eval/tool_episode.h"

namespace mx::eval {
namespace {

using json = nlohmann::json;

struct Graded {
  std::string extracted;
  std::string gold;
  bool correct = false;
};

// One task's hooks: the prompt of question i under seed s, and the grading of its output.
struct TaskHooks {
  int num_examples = 0;
  std::string protocol;
  std::function<json(int example, uint64_t seed)> prompt;
  std::function<std::string(int example)> id;
  std::function<Graded(int example, uint64_t seed, const std::string& output)> grade;
  std::function<void(int example, uint64_t seed, json& record)> annotate;  // optional
};

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return IoError("{}: cannot open for writing", path);
  f << text;
  f.close();
  if (!f) return IoError("{}: write failed", path);
  return Status::Ok();
}

const char* EndpointName(loadgen::Endpoint e) {
  switch (e) {
    case loadgen::Endpoint::kChat:
      return "chat";
    case loadgen::Endpoint::kMessages:
      return "messages";
    case loadgen::Endpoint::kResponses:
      return "responses";
    default:
      return "completions";
  }
}

Status CheckCommon(const TaskOptions& o) {
  if (o.seeds < 1) return InvalidArgument("--seeds {}: must be at least 1", o.seeds);
  if (o.num_examples < 0) return InvalidArgument("--num-examples {}: must be >= 0", o.num_examples);
  if (o.sampling.max_tokens < 1) {
    return InvalidArgument("--max-tokens {}: must be at least 1", o.sampling.max_tokens);
  }
  if (o.sampling.temperature < 0) {
    return InvalidArgument("--temperature {}: must be >= 0", o.sampling.temperature);
  }
  if (o.server.concurrency < 1) {
    return InvalidArgument("--concurrency {}: must be at least 1", o.server.concurrency);
  }
  return Status::Ok();
}

struct ErrorCounts {
  int errors = 0, retries = 0;
  std::map<std::string, int> by_kind;
};

// Writes the log and the summary (fields in tasks.h); `extra` fields are added to it.
Result<json> FinishTask(const TaskOptions& o, const std::string& protocol, int n,
                        const std::vector<std::vector<bool>>& correct, const std::string& log,
                        const ErrorCounts& e, std::chrono::steady_clock::time_point t0,
                        const json& extra) {
  if (!o.output.empty()) MX_RETURN_IF_ERROR(WriteText(o.output, log));

  const Accuracy all = ScoreSeeds(correct);
  json per_seed = json::array();
  for (int s = 0; s < o.seeds; ++s) {
    const Accuracy a = ScoreOne(correct[s]);
    per_seed.push_back({{"seed", o.seed + s},
                        {"accuracy", a.mean},
                        {"stderr", a.stderr_},
                        {"correct", a.correct}});
  }
  const std::string summary_path =
      !o.summary.empty() || o.output.empty() ? o.summary : DefaultSummaryPath(o.output);
  json summary = {
      {"task", o.task},
      {"protocol", protocol},
      {"model", o.server.model},
      {"base_url", o.server.base_url},
      {"endpoint", EndpointName(o.server.endpoint)},
      {"data", o.data},
      {"num_examples", n},
      {"num_shots", o.num_shots},
      {"seeds", o.seeds},
      {"seed", o.seed},
      {"temperature", o.sampling.temperature},
      {"max_tokens", o.sampling.max_tokens},
      {"accuracy", all.mean},
      {"stderr", all.stderr_},
      {"correct", all.correct},
      {"samples", all.samples},
      {"per_seed", per_seed},
      {"errors", e.errors},
      {"errors_by_kind", e.by_kind},
      {"retries", e.retries},
      {"duration_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
      {"output", o.output},
      {"summary", summary_path},
      {"command", o.command},
      {"mxserve_version", MX_VERSION},
  };
  for (const auto& [k, v] : extra.items()) summary[k] = v;
  if (!summary_path.empty()) MX_RETURN_IF_ERROR(WriteText(summary_path, summary.dump(2) + "\n"));
  return summary;
}

Result<json> RunTask(const TaskOptions& o, const TaskHooks& h) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = h.num_examples;
  std::vector<std::string> bodies;
  std::vector<json> prompts;
  bodies.reserve(static_cast<size_t>(n) * o.seeds);
  for (int s = 0; s < o.seeds; ++s) {
    for (int i = 0; i < n; ++i) {
      prompts.push_back(h.prompt(i, o.seed + s));
      bodies.push_back(RequestBody(o.server.model, prompts.back(), o.sampling, o.seed + s));
    }
  }
  std::vector<Response> responses = SendAll(o.server, bodies);

  std::string log;
  std::vector<std::vector<bool>> correct(o.seeds, std::vector<bool>(n));
  std::map<std::string, int> errors_by_kind;
  int errors = 0, retries = 0;
  for (int s = 0; s < o.seeds; ++s) {
    for (int i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(s) * n + i;
      const Response& r = responses[k];
      const uint64_t seed = o.seed + s;
      Graded g = h.grade(i, seed, r.text);
      if (!r.ok) g.correct = false;
      correct[s][i] = g.correct;
      retries += r.attempts - 1;
      json rec = {{"task", o.task},
                  {"seed", seed},
                  {"example", i},
                  {"id", h.id(i)},
                  {"prompt", prompts[k]},
                  {"output", r.text},
                  {"extracted", g.extracted},
                  {"gold", g.gold},
                  {"correct", g.correct},
                  {"attempts", r.attempts},
                  {"prompt_tokens", r.prompt_tokens},
                  {"completion_tokens", r.completion_tokens},
                  {"latency_s", r.latency_s}};
      if (h.annotate) h.annotate(i, seed, rec);
      if (!r.ok) {
        rec["error_kind"] = r.error_kind;
        rec["error"] = r.error;
        ++errors;
        ++errors_by_kind[r.error_kind];
      }
      log += rec.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    }
  }
  return FinishTask(o, h.protocol, n, correct, log, {errors, retries, errors_by_kind}, t0,
                    json::object());
}

std::string SamplingWords(const TaskOptions& o) {
  if (o.sampling.temperature == 0) return "greedy";
  return fmt::format("temperature {:g}, {} seed{}", o.sampling.temperature, o.seeds,
                     o.seeds == 1 ? "" : "s");
}

}  // namespace

std::string FindUpwards(const std::filesystem::path& dir, const std::string& rel) {
  for (std::filesystem::path d = dir; !d.empty(); d = d.parent_path()) {
    std::error_code ec;
    if (std::filesystem::exists(d / rel, ec)) return (d / rel).string();
    if (d == d.parent_path()) break;  // the root
  }
  return "";
}

std::string DefaultArithData() {
  const std::string rel = "tests/data/arith/heldout.jsonl";
  if (std::filesystem::exists(rel)) return rel;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (std::string found = FindUpwards(exe.parent_path(), rel); !found.empty()) return found;
  }
  return rel;
}

std::string DefaultSummaryPath(const std::string& output) {
  const std::string ext = ".jsonl";
  if (output.size() > ext.size() &&
      output.compare(output.size() - ext.size(), ext.size(), ext) == 0) {
    return output.substr(0, output.size() - ext.size()) + ".summary.json";
  }
  return output + ".summary.json";
}

Result<json> RunQaTask(const TaskOptions& o) {
  MX_RETURN_IF_ERROR(CheckCommon(o));
  if (o.num_shots < 0) return InvalidArgument("--num-shots {}: must be >= 0", o.num_shots);
  MX_ASSIGN_OR_RETURN(std::vector<QaExample> test, LoadQaJsonl(o.data));
  std::vector<QaExample> shots;
  if (o.num_shots > 0) {
    if (o.train_data.empty()) {
      return InvalidArgument("--num-shots {} needs a train split (--train-data)", o.num_shots);
    }
    MX_ASSIGN_OR_RETURN(std::vector<QaExample> train, LoadQaJsonl(o.train_data));
    if (static_cast<int>(train.size()) < o.num_shots) {
      return InvalidArgument("--num-shots {}: {} has only {} records", o.num_shots, o.train_data,
                             train.size());
    }
    shots.assign(train.begin(), train.begin() + o.num_shots);
  }
  if (o.num_examples > static_cast<int>(test.size())) {
    return InvalidArgument("--num-examples {}: {} has only {} records", o.num_examples, o.data,
                           test.size());
  }
  if (o.num_examples > 0) test.resize(o.num_examples);
  TaskOptions opts = o;
  if (opts.sampling.stop.empty()) opts.sampling.stop = QaStops(o.server.endpoint);
  TaskHooks h;
  h.num_examples = static_cast<int>(test.size());
  h.protocol = fmt::format("{}-shot {}, {}, exact match of the final number", o.num_shots,
                           EndpointName(o.server.endpoint), SamplingWords(o));
  h.prompt = [&](int i, uint64_t) { return QaPrompt(o.server.endpoint, shots, test[i].question); };
  h.id = [&](int i) { return test[i].id; };
  h.grade = [&](int i, uint64_t, const std::string& output) {
    Graded g;
    g.extracted = NormalizeNumber(ExtractNumber(output));
    g.gold = test[i].gold;
    g.correct = !g.extracted.empty() && g.extracted == g.gold;
    return g;
  };
  return RunTask(opts, h);
}

Result<json> RunMcqTask(const TaskOptions& o) {
  MX_RETURN_IF_ERROR(CheckCommon(o));
  if (o.num_shots != 0) return InvalidArgument("mcq is zero-shot: --num-shots must be 0");
  MX_ASSIGN_OR_RETURN(std::vector<McqExample> data, LoadMcqJsonl(o.data));
  if (o.num_examples > static_cast<int>(data.size())) {
    return InvalidArgument("--num-examples {}: {} has only {} records", o.num_examples, o.data,
                           data.size());
  }
  if (o.num_examples > 0) data.resize(o.num_examples);
  auto order = [&](int i, uint64_t seed) {
    const int n = static_cast<int>(data[i].choices.size());
    if (o.shuffle) return ShuffledChoices(n, seed, i);
    std::vector<int> identity(n);
    for (int k = 0; k < n; ++k) identity[k] = k;
    return identity;
  };
  TaskHooks h;
  h.num_examples = static_cast<int>(data.size());
  h.protocol =
      fmt::format("0-shot {}, {}, choices {}, letter match", EndpointName(o.server.endpoint),
                  SamplingWords(o), o.shuffle ? "shuffled per seed" : "in file order");
  h.prompt = [&](int i, uint64_t seed) {
    return McqPrompt(o.server.endpoint, data[i], order(i, seed));
  };
  h.id = [&](int i) { return data[i].id; };
  h.grade = [&](int i, uint64_t seed, const std::string& output) {
    const std::vector<int> ord = order(i, seed);
    Graded g;
    for (size_t k = 0; k < ord.size(); ++k) {
      if (ord[k] == data[i].answer) g.gold = std::string(1, static_cast<char>('A' + k));
    }
    const char c = ExtractLetter(output, static_cast<int>(ord.size()));
    if (c != '\0') g.extracted = std::string(1, c);
    g.correct = !g.extracted.empty() && g.extracted == g.gold;
    return g;
  };
  h.annotate = [&](int i, uint64_t seed, json& rec) { rec["order"] = order(i, seed); };
  return RunTask(o, h);
}

double PassHatK(const std::vector<int>& successes, int trials, int k) {
  if (successes.empty() || k < 1 || k > trials) return 0;
  // C(c, k) / C(n, k) = prod_{j<k} (c - j) / (n - j).
  double sum = 0;
  for (int c : successes) {
    double p = 1;
    for (int j = 0; j < k; ++j) p *= c - j <= 0 ? 0.0 : static_cast<double>(c - j) / (trials - j);
    sum += p;
  }
  return sum / static_cast<double>(successes.size());
}

Result<json> RunToolsTask(const TaskOptions& o, int max_steps) {
  MX_RETURN_IF_ERROR(CheckCommon(o));
  if (max_steps < 1 || max_steps > kMaxToolSteps) {
    return InvalidArgument("--max-steps {}: expected 1 to {}", max_steps, kMaxToolSteps);
  }
  if (o.server.endpoint != loadgen::Endpoint::kChat &&
      o.server.endpoint != loadgen::Endpoint::kMessages) {
    return InvalidArgument("eval tools: --api must be chat or messages");
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ToolTask> tasks = ToolTasks();
  if (o.num_examples > static_cast<int>(tasks.size())) {
    return InvalidArgument("--num-examples {}: there are {} tool tasks", o.num_examples,
                           tasks.size());
  }
  if (o.num_examples > 0) tasks.resize(static_cast<size_t>(o.num_examples));
  const int n = static_cast<int>(tasks.size());
  std::vector<Episode> episodes;
  for (int s = 0; s < o.seeds; ++s) {
    for (const ToolTask& t : tasks) episodes.push_back(StartEpisode(t, o.seed + s));
  }
  // Step by step: the next request of every running episode, sent together.
  ServerOptions server = o.server;
  for (int step = 1;; ++step) {
    std::vector<size_t> live;
    std::vector<std::string> bodies;
    for (size_t k = 0; k < episodes.size(); ++k) {
      if (episodes[k].done) continue;
      live.push_back(k);
      bodies.push_back(EpisodeBody(episodes[k], o.server.endpoint, o.server.model, o.sampling));
    }
    if (live.empty()) break;
    server.label = fmt::format("{} step {}", o.server.label, step);
    std::vector<Response> responses = SendAll(server, bodies);
    for (size_t i = 0; i < live.size(); ++i) Advance(episodes[live[i]], responses[i], max_steps);
  }

  std::string log;
  std::vector<std::vector<bool>> correct(o.seeds, std::vector<bool>(n));
  std::vector<int> successes(n, 0);
  ErrorCounts errors;
  std::map<std::string, int> ends;
  for (int s = 0; s < o.seeds; ++s) {
    for (int i = 0; i < n; ++i) {
      const Episode& e = episodes[static_cast<size_t>(s) * n + i];
      Judgement j = Judge(tasks[i], e.store, e.answers);
      if (e.end == "error") {
        j.success = false;
        j.reasons.push_back("request error: " + e.error_kind);
        ++errors.errors;
        ++errors.by_kind[e.error_kind];
      }
      correct[s][i] = j.success;
      successes[i] += j.success ? 1 : 0;
      errors.retries += e.attempts - e.steps;
      ++ends[e.end];
      json rec = {{"task", o.task},       {"seed", e.seed},         {"example", i},
                  {"id", tasks[i].id},    {"success", j.success},   {"reasons", j.reasons},
                  {"end", e.end},         {"steps", e.steps},       {"tool_calls", e.tool_calls},
                  {"answers", e.answers}, {"messages", e.messages}, {"attempts", e.attempts}};
      if (!(e.store == tasks[i].expected)) {
        rec["final_state"] = e.store.ToJson();
        rec["expected_state"] = tasks[i].expected.ToJson();
      }
      if (e.end == "error") {
        rec["error_kind"] = e.error_kind;
        rec["error"] = e.error;
      }
      log += rec.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    }
  }
  json pass = json::object();
  for (int k = 1; k <= o.seeds; ++k) pass[std::to_string(k)] = PassHatK(successes, o.seeds, k);
  json per_task = json::array();
  for (int i = 0; i < n; ++i) {
    per_task.push_back({{"id", tasks[i].id}, {"successes", successes[i]}});
  }
  const std::string protocol = fmt::format(
      "{} scripted tool tasks, {}, {}, at most {} steps; success = final store and answers; "
      "accuracy = pass^1",
      n, EndpointName(o.server.endpoint), SamplingWords(o), max_steps);
  return FinishTask(
      o, protocol, n, correct, log, errors, t0,
      {{"pass_hat_k", pass}, {"per_task", per_task}, {"ends", ends}, {"max_steps", max_steps}});
}

}  // namespace mx::eval
