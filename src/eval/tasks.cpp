#include "eval/tasks.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "eval/datasets.h"
#include "eval/extract.h"
#include "eval/scoring.h"

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
  return e == loadgen::Endpoint::kChat ? "chat" : "completions";
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
      {"protocol", h.protocol},
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
      {"errors", errors},
      {"errors_by_kind", errors_by_kind},
      {"retries", retries},
      {"duration_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
      {"output", o.output},
      {"summary", summary_path},
      {"command", o.command},
      {"mxserve_version", MX_VERSION},
  };
  if (!summary_path.empty()) MX_RETURN_IF_ERROR(WriteText(summary_path, summary.dump(2) + "\n"));
  return summary;
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

}  // namespace mx::eval
