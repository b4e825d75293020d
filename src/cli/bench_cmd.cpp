// `mxserve bench serve|sweep|single-stream|sessions|mock-server`: the load benchmark of any
// OpenAI-compatible server (mxserve serve, sglang, vLLM), with sglang/vLLM flag names and
// result fields; `sessions` also speaks Anthropic Messages and OpenAI Responses. The client,
// metrics and reports live in src/loadgen; this file maps flags to them, applies presets and
// --scale, and prints. `mxserve bench offline` (the model itself, llama-bench style) is in
// bench_offline.cpp.
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "cli/bench_offline.h"
#include "cli/cli_util.h"
#include "cli/verb.h"
#include "loadgen/client.h"
#include "loadgen/mock_server.h"
#include "loadgen/report.h"
#include "loadgen/serve_bench.h"
#include "loadgen/sessions.h"
#include "loadgen/single_stream.h"
#include "loadgen/sweep.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;
using namespace mx::loadgen;

struct BenchArgs {
  // connection
  std::string base_url = "http://127.0.0.1:30000";
  std::string model = "default";
  std::string endpoint = "completions";
  std::string prompt_format = "ids";
  std::string api_key;
  double request_timeout_s = 0;
  double idle_timeout_s = 120;
  std::string tokenizer;
  // workload
  int num_prompts = 1000;
  std::string request_rate = "inf";
  double burstiness = 1.0;
  int max_concurrency = 0;
  int random_input_len = 1024;
  int random_output_len = 1024;
  double random_range_ratio = 1.0;
  double shared_prefix_ratio = 0;
  int num_prefix_groups = 1;
  int random_vocab_size = 32000;
  int warmup_requests = 1;
  bool warm_prefixes = false;
  uint64_t seed = 1;
  // output
  std::string output_file;
  bool output_details = false;
  std::string tag;
  double node_price_per_hour = 0;
  std::string preset;
  double scale = 1.0;
  // sweep
  std::string request_rates = "0.5,1,1.5,2,2.2,2.4";
  double duration_s = 0;
  double ttft_slo_ms = 5000;
  int slo_percentile = 50;
  std::string html_file = "bench-sweep.html";
  std::string summary_file = "bench-sweep.json";
  // single-stream
  int input_len = 10000;
  int output_len = 1500;
  int runs = 5;
  std::string corpus_dir = "/usr/share/common-licenses";
  // sessions
  SessionSpec sessions;
  std::string api = "chat";
  double think_time_ms = 0;
  bool no_warm_system = false;
  bool no_ignore_eos = false;
  bool accept_empty_replies = false;
  std::string sessions_html_file = "bench-sessions.html";
  // mock-server
  MockServerOptions mock;
};

// Options set on the command line win over a preset's values.
struct Seen {
  CLI::App* app;
  bool operator()(const std::string& flag) const {
    auto* o = app->get_option_no_throw(flag);
    return o != nullptr && o->count() > 0;
  }
};

Status ApplyPreset(BenchArgs& a, const Seen& seen, bool sweep) {
  if (a.preset.empty()) {
  } else if (a.preset == "report-throughput") {
    // Workload A: 20k in / 1k out, 60% prefix-cache hit, open-loop sweep, TTFT <= 5 s.
    if (!seen("--random-input-len")) a.random_input_len = 20000;
    if (!seen("--random-output-len")) a.random_output_len = 1000;
    if (!seen("--shared-prefix-ratio")) a.shared_prefix_ratio = 0.6;
    if (!seen("--num-prefix-groups")) a.num_prefix_groups = 8;
    if (!seen("--warm-prefixes")) a.warm_prefixes = true;
    if (sweep) {
      if (!seen("--request-rates")) a.request_rates = "0.5,1,1.5,2,2.2,2.4";
      if (!seen("--ttft-slo-ms")) a.ttft_slo_ms = 5000;
      if (!seen("--slo-percentile")) a.slo_percentile = 95;
      if (!seen("--duration-s") && !seen("--num-prompts")) a.duration_s = 300;
    }
  } else if (a.preset == "aa-single-stream") {
    // Workload B: Artificial Analysis' default single-stream test, 10k in / 1.5k out.
    if (!seen("--input-len")) a.input_len = 10000;
    if (!seen("--output-len")) a.output_len = 1500;
    if (!seen("--runs")) a.runs = 5;
    if (!seen("--endpoint")) a.endpoint = "chat";
  } else {
    return InvalidArgument("--preset {}: unknown (report-throughput, aa-single-stream)", a.preset);
  }
  if (!(a.scale > 0)) return InvalidArgument("--scale {} must be > 0", a.scale);
  if (a.scale != 1.0) {
    auto sc = [&](int& v) { v = std::max(1, static_cast<int>(std::lround(v * a.scale))); };
    sc(a.random_input_len);
    sc(a.random_output_len);
    sc(a.input_len);
    sc(a.output_len);
  }
  return Status::Ok();
}

Result<double> ParseRate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "INF") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0)) {
    return InvalidArgument("request rate '{}' is not a positive number or inf", s);
  }
  return v;
}

Result<std::vector<double>> ParseRates(const std::string& s, double scale) {
  std::vector<double> rates;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    MX_ASSIGN_OR_RETURN(double r, ParseRate(item));
    if (std::isinf(r)) return InvalidArgument("--request-rates: inf is not a rate to sweep");
    rates.push_back(r * scale);
  }
  if (rates.empty()) return InvalidArgument("--request-rates: empty list");
  return rates;
}

Result<std::unique_ptr<tok::Tokenizer>> LoadTokenizer(const std::string& path) {
  if (path.empty()) return std::unique_ptr<tok::Tokenizer>();
  std::string file = fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
  MX_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::Tokenizer::FromFile(file));
  return std::make_unique<tok::Tokenizer>(std::move(t));
}

void RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// A live one-line display on a terminal; nothing when stderr is redirected.
std::function<void(int, int, int, int, double)> Progress(const std::string& label, int total) {
  if (!isatty(STDERR_FILENO)) return nullptr;
  return [label, total](int sent, int done, int failed, int in_flight, double t) {
    std::fprintf(stderr, "\r\033[K%s %d/%d sent, %d done, %d failed, %d in flight, %.1f s%s",
                 label.c_str(), sent, total, done, failed, in_flight, t, done >= total ? "\n" : "");
    std::fflush(stderr);
  };
}

Result<ServeConfig> MakeServeConfig(const BenchArgs& a, const tok::Tokenizer* tokenizer) {
  ServeConfig c;
  c.client.base_url = a.base_url;
  c.client.model = a.model;
  if (a.endpoint == "chat") {
    c.client.endpoint = Endpoint::kChat;
  } else if (a.endpoint != "completions") {
    return InvalidArgument("--endpoint {}: expected completions or chat", a.endpoint);
  }
  if (a.prompt_format != "ids" && a.prompt_format != "text") {
    return InvalidArgument("--prompt-format {}: expected ids or text", a.prompt_format);
  }
  c.client.send_ids = a.prompt_format == "ids";
  c.client.max_concurrency = a.max_concurrency;
  c.client.request_timeout_s = a.request_timeout_s;
  c.client.idle_timeout_s = a.idle_timeout_s;
  c.client.api_key = a.api_key;
  c.client.keep_text = a.output_details;
  c.client.tokenizer = tokenizer;
  c.prompts.num_prompts = a.num_prompts;
  c.prompts.input_len = a.random_input_len;
  c.prompts.output_len = a.random_output_len;
  c.prompts.range_ratio = a.random_range_ratio;
  c.prompts.shared_prefix_ratio = a.shared_prefix_ratio;
  c.prompts.num_prefix_groups = a.num_prefix_groups;
  c.prompts.seed = a.seed;
  c.prompts.vocab_size = a.random_vocab_size;
  c.prompts.text = c.client.endpoint == Endpoint::kChat || !c.client.send_ids;
  c.burstiness = a.burstiness;
  c.warmup_requests = a.warmup_requests;
  c.warm_prefixes = a.warm_prefixes;
  return c;
}

RunDescription Describe(const BenchArgs& a, const ServeConfig& c, double rate) {
  RunDescription d;
  d.tag = a.tag;
  d.backend = c.client.endpoint == Endpoint::kChat ? "openai-chat" : "openai";
  d.base_url = a.base_url;
  d.model = a.model;
  d.dataset_name = a.shared_prefix_ratio > 0 ? "random-shared-prefix" : "random";
  d.request_rate = rate;
  d.burstiness = a.burstiness;
  d.max_concurrency = a.max_concurrency;
  d.num_prompts = c.prompts.num_prompts;
  d.random_input_len = a.random_input_len;
  d.random_output_len = a.random_output_len;
  d.random_range_ratio = a.random_range_ratio;
  d.shared_prefix_ratio = a.shared_prefix_ratio;
  d.num_prefix_groups = a.shared_prefix_ratio > 0 ? a.num_prefix_groups : 0;
  d.seed = c.prompts.seed;
  d.node_price_per_hour = a.node_price_per_hour;
  return d;
}

void AddWorkloadOptions(CLI::App* s, BenchArgs& a) {
  s->add_option("--base-url", a.base_url, "server URL (default http://127.0.0.1:30000)");
  s->add_option("--model", a.model, "model name sent in requests");
  s->add_option("--endpoint", a.endpoint, "completions (token ids) | chat (text)");
  s->add_option("--prompt-format", a.prompt_format,
                "completions prompt as ids (exact) or text (re-tokenized to check)");
  s->add_option("--api-key", a.api_key, "sent as a Bearer token");
  s->add_option("--request-timeout", a.request_timeout_s, "seconds per request (0 = none)");
  s->add_option("--idle-timeout", a.idle_timeout_s,
                "seconds a request may go without a byte from the server before it fails "
                "(default 120; 0 = none)")
      ->check(CLI::NonNegativeNumber);
  s->add_option(
      "--tokenizer", a.tokenizer,
      "MODEL_DIR or tokenizer.json: word-token prompts, text prompts, retokenized counts");
  s->add_option("--num-prompts", a.num_prompts, "measured requests");
  s->add_option("--burstiness", a.burstiness, "gamma shape of inter-arrival gaps (1 = Poisson)");
  s->add_option("--max-concurrency", a.max_concurrency,
                "client-side cap (default none: open loop)");
  s->add_option("--random-input-len", a.random_input_len, "prompt tokens");
  s->add_option("--random-output-len", a.random_output_len,
                "output tokens (max_tokens + ignore_eos)");
  s->add_option("--random-range-ratio", a.random_range_ratio,
                "lengths uniform in [L*r, L] (sglang); 1 = exact (default)");
  s->add_option("--shared-prefix-ratio", a.shared_prefix_ratio,
                "fraction of each prompt shared within its prefix group");
  s->add_option("--num-prefix-groups", a.num_prefix_groups, "distinct shared prefixes");
  s->add_flag("--warm-prefixes", a.warm_prefixes,
              "send each group's prefix once (max_tokens 1) before measuring");
  s->add_option("--random-vocab-size", a.random_vocab_size, "id range without --tokenizer");
  s->add_option("--warmup-requests", a.warmup_requests, "unmeasured requests first (default 1)");
  s->add_option("--seed", a.seed, "prompt and arrival seed");
  s->add_option("--output-file", a.output_file, "append one JSON line per run");
  s->add_flag("--output-details", a.output_details, "per-request arrays in the JSON");
  s->add_option("--tag", a.tag, "free text stored in the JSON");
  s->add_option("--node-price-per-hour", a.node_price_per_hour,
                "USD per node-hour: adds $/M tokens");
  s->add_option("--preset", a.preset, "report-throughput");
  s->add_option("--scale", a.scale, "multiply lengths and rates (quick reproductions)");
}

int RunServe(BenchArgs& a, CLI::App* sub) {
  if (auto st = ApplyPreset(a, Seen{sub}, false); !st.ok()) return Fail(st.message());
  auto rate = ParseRate(a.request_rate);
  if (!rate.ok()) return Fail("--request-rate: " + rate.status().message());
  const double r = std::isinf(*rate) ? *rate : *rate * a.scale;
  auto tok = LoadTokenizer(a.tokenizer);
  if (!tok.ok()) return Fail(tok.status().message());
  auto c = MakeServeConfig(a, tok->get());
  if (!c.ok()) return Fail(c.status().message());
  c->request_rate = r;
  c->client.progress = Progress(fmt::format("[{:g} req/s]", r), a.num_prompts);
  RaiseFdLimit();
  auto res = RunServeBenchmark(*c);
  if (!res.ok()) return Fail(res.status().message());
  RunDescription d = Describe(a, *c, r);
  std::printf("%s", FormatTable(d, res->metrics).c_str());
  if (res->prompts.text_len_mismatches > 0) {
    std::fprintf(stderr, "warning: %d text prompts re-tokenized to a different length\n",
                 res->prompts.text_len_mismatches);
  }
  if (!a.output_file.empty()) {
    auto j = ResultJson(d, res->metrics, a.output_details ? &res->run.records : nullptr);
    if (auto st = AppendJsonLine(a.output_file, j); !st.ok()) return Fail(st.message());
  }
  return 0;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return IoError("{}: cannot open for writing", path);
  f << text;
  if (!f) return IoError("{}: write failed", path);
  return Status::Ok();
}

int RunSweepCmd(BenchArgs& a, CLI::App* sub, const std::string& command) {
  Seen seen{sub};
  if (auto st = ApplyPreset(a, seen, true); !st.ok()) return Fail(st.message());
  auto rates = ParseRates(a.request_rates, a.scale);
  if (!rates.ok()) return Fail(rates.status().message());
  if (a.slo_percentile != 50 && a.slo_percentile != 95) {
    return Fail(fmt::format("--slo-percentile {}: expected 50 or 95", a.slo_percentile));
  }
  auto tok = LoadTokenizer(a.tokenizer);
  if (!tok.ok()) return Fail(tok.status().message());
  auto c = MakeServeConfig(a, tok->get());
  if (!c.ok()) return Fail(c.status().message());
  SweepConfig sc;
  sc.base = *c;
  sc.rates = *rates;
  sc.duration_s = seen("--num-prompts") ? 0 : a.duration_s;
  sc.slo.ttft_slo_ms = a.ttft_slo_ms;
  sc.slo.slo_percentile = a.slo_percentile;
  RaiseFdLimit();
  int point = 0;
  // Progress per point: the count is known only once the rate is.
  sc.base.client.progress = nullptr;
  auto on_point = [&](const SweepPoint& p, const ServeResult& r) {
    RunDescription d = Describe(a, *c, p.rate);
    d.num_prompts = p.metrics.num_prompts;
    d.seed = sc.base.prompts.seed + 1000003ull * static_cast<uint64_t>(point + 1);
    std::fprintf(stderr,
                 "rate %g req/s: %d/%d ok, %.1f output tok/s, TTFT p50 %.0f ms p95 %.0f ms: %s\n",
                 p.rate, p.metrics.completed, p.metrics.num_prompts, p.metrics.output_throughput,
                 p.metrics.ttft_ms.median, p.metrics.ttft_ms.p95, p.verdict.c_str());
    if (!a.output_file.empty()) {
      auto j = ResultJson(d, p.metrics, a.output_details ? &r.run.records : nullptr);
      j["sustained"] = p.sustained;
      j["verdict"] = p.verdict;
      if (auto st = AppendJsonLine(a.output_file, j); !st.ok()) {
        std::fprintf(stderr, "mxserve: error: %s\n", st.message().c_str());
      }
    }
    ++point;
  };
  if (isatty(STDERR_FILENO)) {
    // Live display for each point; the label carries the rate.
    sc.base.client.progress = [](int sent, int done, int failed, int in_flight, double t) {
      std::fprintf(stderr, "\r\033[K  %d sent, %d done, %d failed, %d in flight, %.1f s", sent,
                   done, failed, in_flight, t);
      std::fflush(stderr);
    };
  }
  auto rep = RunSweep(sc, [&](const SweepPoint& p, const ServeResult& r) {
    if (sc.base.client.progress) std::fprintf(stderr, "\r\033[K");
    on_point(p, r);
  });
  if (!rep.ok()) return Fail(rep.status().message());
  rep->title =
      fmt::format("mxserve bench sweep: {} in / {} out, {:.0f}% shared prefix, {}",
                  a.random_input_len, a.random_output_len, 100 * a.shared_prefix_ratio, a.model);
  rep->command = command;
  rep->node_price_per_hour = a.node_price_per_hour;
  std::printf("%s", SweepTable(*rep).c_str());
  if (!a.summary_file.empty()) {
    if (auto st = WriteFile(a.summary_file, SweepJson(*rep).dump(2) + "\n"); !st.ok()) {
      return Fail(st.message());
    }
  }
  if (!a.html_file.empty()) {
    if (auto st = WriteFile(a.html_file, SweepHtml(*rep)); !st.ok()) return Fail(st.message());
    std::fprintf(stderr, "wrote %s\n", a.html_file.c_str());
  }
  return 0;
}

int RunSingle(BenchArgs& a, CLI::App* sub) {
  if (auto st = ApplyPreset(a, Seen{sub}, false); !st.ok()) return Fail(st.message());
  if (a.tokenizer.empty()) {
    return Fail("single-stream needs --tokenizer MODEL_DIR (exact prompt lengths, token counts)");
  }
  auto tok = LoadTokenizer(a.tokenizer);
  if (!tok.ok()) return Fail(tok.status().message());
  SingleStreamSpec spec;
  spec.input_len = a.input_len;
  spec.output_len = a.output_len;
  spec.runs = a.runs;
  spec.corpus_dir = a.corpus_dir;
  spec.seed = a.seed;
  auto prompts = MakeNaturalPrompts(spec, **tok);
  if (!prompts.ok()) return Fail(prompts.status().message());
  auto c = MakeServeConfig(a, tok->get());
  if (!c.ok()) return Fail(c.status().message());
  c->client.send_ids = false;
  SingleStreamResult r = RunSingleStream(c->client, *prompts, **tok);
  std::printf("%s", SingleStreamTable(r).c_str());
  if (!a.output_file.empty()) {
    auto j = SingleStreamJson(spec, r);
    j["base_url"] = a.base_url;
    j["model_id"] = a.model;
    j["endpoint"] = a.endpoint;
    if (auto st = AppendJsonLine(a.output_file, j); !st.ok()) return Fail(st.message());
  }
  return r.failed == static_cast<int>(r.runs.size()) ? 1 : 0;
}

// `agent-coding`: a coding agent's trace shape. A 3,000-token system prompt (instructions and
// tool schemas, the same for every session) and a 1,000-token task make the first turn 4k;
// each later turn adds the reply (up to 300 tokens) and a tool result (a file or a command's
// output, 1,250-2,500 tokens), so ten turns reach about 25k; half a second of tool time
// between turns; four sessions at once. --scale multiplies the lengths.
Status ApplySessionsPreset(BenchArgs& a, const Seen& seen) {
  SessionSpec& s = a.sessions;
  if (a.preset == "agent-coding") {
    if (!seen("--sessions")) s.sessions = 4;
    if (!seen("--turns")) s.turns = 10;
    if (!seen("--system-len")) s.system_len = 3000;
    if (!seen("--first-user-len")) s.first_user_len = 1000;
    if (!seen("--tool-result-len")) s.tool_result_len = 2500;
    if (!seen("--range-ratio")) s.range_ratio = 0.5;
    if (!seen("--output-len")) s.output_len = 300;
    if (!seen("--think-time-ms")) a.think_time_ms = 500;
  } else if (!a.preset.empty()) {
    return InvalidArgument("--preset {}: unknown (agent-coding)", a.preset);
  }
  if (!(a.scale > 0)) return InvalidArgument("--scale {} must be > 0", a.scale);
  if (a.scale != 1.0) {
    auto sc = [&](int& v, int lo) { v = std::max(lo, static_cast<int>(std::lround(v * a.scale))); };
    sc(s.system_len, 0);
    sc(s.first_user_len, 1);
    sc(s.tool_result_len, 1);
    sc(s.output_len, 1);
  }
  s.think_time_s = a.think_time_ms * 1e-3;
  s.warm_system = !a.no_warm_system;
  s.ignore_eos = !a.no_ignore_eos;
  s.accept_empty_replies = a.accept_empty_replies;
  s.seed = a.seed;
  return Status::Ok();
}

int RunSessionsCmd(BenchArgs& a, CLI::App* sub, const std::string& command) {
  if (auto st = ApplySessionsPreset(a, Seen{sub}); !st.ok()) return Fail(st.message());
  SessionsConfig c;
  if (a.api == "chat") {
    c.client.endpoint = Endpoint::kChat;
  } else if (a.api == "messages") {
    c.client.endpoint = Endpoint::kMessages;
  } else if (a.api == "responses") {
    c.client.endpoint = Endpoint::kResponses;
  } else {
    return Fail(fmt::format("--api {}: expected chat, messages or responses", a.api));
  }
  if (auto st = ValidateSpec(a.sessions); !st.ok()) return Fail(st.message());
  auto tok = LoadTokenizer(a.tokenizer);
  if (!tok.ok()) return Fail(tok.status().message());
  c.client.base_url = a.base_url;
  c.client.model = a.model;
  c.client.api_key = a.api_key;
  c.client.request_timeout_s = a.request_timeout_s;
  c.client.idle_timeout_s = a.idle_timeout_s;
  c.spec = a.sessions;
  c.tokenizer = tok->get();
  if (isatty(STDERR_FILENO)) {
    c.progress = [](int turns, int total, int sessions_done, int failed, double t) {
      std::fprintf(stderr, "\r\033[K[sessions] %d/%d turns, %d sessions done, %d failed, %.1f s%s",
                   turns, total, sessions_done, failed, t, turns >= total ? "\n" : "");
      std::fflush(stderr);
    };
  }
  RaiseFdLimit();
  auto run = RunSessions(c);
  if (!run.ok()) return Fail(run.status().message());
  SessionsReport r = SummarizeSessions(*run);
  r.spec = c.spec;
  r.api = a.api;
  r.base_url = a.base_url;
  r.model = a.model;
  r.command = command;
  r.title = fmt::format("mxserve bench sessions: {} sessions x {} turns, {} API, {}",
                        c.spec.sessions, c.spec.turns, a.api, a.model);
  std::printf("%s", SessionsTable(r).c_str());
  if (!a.output_file.empty()) {
    nlohmann::json j = SessionsJson(r);
    j["tag"] = a.tag;
    if (auto st = AppendJsonLine(a.output_file, j); !st.ok()) return Fail(st.message());
  }
  if (!a.sessions_html_file.empty()) {
    if (auto st = WriteFile(a.sessions_html_file, SessionsHtml(r)); !st.ok()) {
      return Fail(st.message());
    }
    std::fprintf(stderr, "wrote %s\n", a.sessions_html_file.c_str());
  }
  return r.completed_sessions == 0 ? 1 : 0;
}

int RunMock(BenchArgs& a) {
  RaiseFdLimit();
  auto tok = LoadTokenizer(a.tokenizer);
  if (!tok.ok()) return Fail(tok.status().message());
  a.mock.tokenizer = tok->get();
  auto s = MockServer::Start(a.mock);
  if (!s.ok()) return Fail(s.status().message());
  std::fprintf(stderr,
               "mock OpenAI-compatible server on %s (TTFT %g ms + %g us/uncached token, "
               "ITL %g ms, %d slots)\n",
               (*s)->base_url().c_str(), a.mock.ttft_ms, a.mock.prefill_us_per_uncached_token,
               a.mock.itl_ms, a.mock.slots);
  (*s)->Wait();
  return 0;
}

VerbRun SetupBench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* bench = app.add_subcommand(
      "bench", "Benchmark: an OpenAI-compatible server under load, or the model offline");
  bench->require_subcommand(1);

  auto* serve = bench->add_subcommand("serve", "One open-loop run: TTFT/TPOT/ITL/E2E, throughput");
  AddWorkloadOptions(serve, *a);
  serve->add_option("--request-rate", a->request_rate, "req/s, or inf (all at once; default)");

  auto* sweep = bench->add_subcommand("sweep", "A run per request rate, the knee, an HTML report");
  AddWorkloadOptions(sweep, *a);
  sweep->add_option("--request-rates", a->request_rates, "comma-separated req/s");
  sweep->add_option("--duration-s", a->duration_s,
                    "seconds of arrivals per rate (else --num-prompts)");
  sweep->add_option("--ttft-slo-ms", a->ttft_slo_ms, "TTFT SLO for the knee (default 5000)");
  sweep->add_option("--slo-percentile", a->slo_percentile, "50 or 95");
  sweep->add_option("--html-file", a->html_file, "self-contained HTML report");
  sweep->add_option("--summary-file", a->summary_file, "sweep summary JSON (points + knee)");

  auto* single =
      bench->add_subcommand("single-stream", "One request at a time (Artificial Analysis)");
  single->add_option("--base-url", a->base_url, "server URL");
  single->add_option("--model", a->model, "model name sent in requests");
  single->add_option("--endpoint", a->endpoint, "chat (default) | completions");
  single->add_option("--api-key", a->api_key, "sent as a Bearer token");
  single->add_option("--tokenizer", a->tokenizer, "MODEL_DIR or tokenizer.json (required)");
  single->add_option("--input-len", a->input_len, "prompt tokens (default 10000)");
  single->add_option("--output-len", a->output_len, "output tokens (default 1500)");
  single->add_option("--runs", a->runs, "requests, one after another (default 5)");
  single->add_option("--corpus-dir", a->corpus_dir, "natural-language text for prompts");
  single->add_option("--seed", a->seed, "prompt seed");
  single->add_option("--output-file", a->output_file, "append one JSON line");
  single->add_option("--preset", a->preset, "aa-single-stream");
  single->add_option("--scale", a->scale, "multiply lengths");
  single->add_option("--request-timeout", a->request_timeout_s, "seconds per request (0 = none)");

  auto* ses = bench->add_subcommand(
      "sessions", "Multi-turn agent sessions in parallel: per-turn TTFT, ITL, cache hits");
  SessionSpec& sp = a->sessions;
  ses->add_option("--base-url", a->base_url, "server URL (default http://127.0.0.1:30000)");
  ses->add_option("--model", a->model, "model name sent in requests");
  ses->add_option("--api", a->api, "chat (default) | messages (Anthropic) | responses (OpenAI)");
  ses->add_option("--api-key", a->api_key, "sent as a Bearer token and as x-api-key");
  ses->add_option("--tokenizer", a->tokenizer,
                  "MODEL_DIR or tokenizer.json: texts of exact token lengths, counts in tokens");
  ses->add_option("--request-timeout", a->request_timeout_s, "seconds per turn (0 = none)");
  ses->add_option("--idle-timeout", a->idle_timeout_s,
                  "seconds a turn may go without a byte from the server (default 120; 0 = none)")
      ->check(CLI::NonNegativeNumber);
  ses->add_option("--sessions", sp.sessions,
                  fmt::format("sessions in parallel (default 8, at most {})", kMaxSessions));
  ses->add_option("--turns", sp.turns,
                  fmt::format("turns per session (default 8, at most {})", kMaxTurns));
  ses->add_option("--system-len", sp.system_len,
                  "system prompt tokens, shared by all sessions (default 2000)");
  ses->add_option("--first-user-len", sp.first_user_len, "the first user turn (default 1000)");
  ses->add_option("--tool-result-len", sp.tool_result_len,
                  "each later turn's tool result (default 2500)");
  ses->add_option("--range-ratio", sp.range_ratio,
                  "tool results uniform in [L*r, L]; 1 = exact (default)");
  ses->add_option("--output-len", sp.output_len, "max tokens per turn (default 256)");
  ses->add_option("--think-time-ms", a->think_time_ms,
                  "between a reply and the next turn (the tool running; default 0)");
  ses->add_flag("--no-ignore-eos", a->no_ignore_eos,
                "chat: let the model stop early (default: ignore_eos, exact lengths)");
  ses->add_flag("--accept-empty-replies", a->accept_empty_replies,
                "a reply that streams no text completes its turn (sent back empty, TTFT = E2E, "
                "counted as empty_replies) instead of failing it as no_output");
  ses->add_flag("--no-warm-system", a->no_warm_system,
                "do not send the system prompt once before measuring");
  ses->add_option("--seed", a->seed, "text seed");
  ses->add_option("--preset", a->preset, "agent-coding");
  ses->add_option("--scale", a->scale, "multiply the lengths (quick reproductions)");
  ses->add_option("--output-file", a->output_file, "append one JSON line per run");
  ses->add_option("--html-file", a->sessions_html_file,
                  "self-contained HTML report (default bench-sessions.html; '' = none)");
  ses->add_option("--tag", a->tag, "free text stored in the JSON");

  auto* mock =
      bench->add_subcommand("mock-server", "A scripted OpenAI-compatible server for trials");
  mock->add_option("--host", a->mock.host, "bind address");
  mock->add_option("--port", a->mock.port, "port (0 = any free one)");
  mock->add_option("--ttft-ms", a->mock.ttft_ms, "fixed time to first token");
  mock->add_option("--prefill-us-per-token", a->mock.prefill_us_per_uncached_token,
                   "extra TTFT per prompt token not in the prefix cache");
  mock->add_option("--itl-ms", a->mock.itl_ms, "inter-token latency");
  mock->add_option("--tokens-per-chunk", a->mock.tokens_per_chunk, "tokens per SSE chunk");
  mock->add_option("--slots", a->mock.slots, "requests served at once (0 = unlimited)");
  mock->add_option("--cache-block", a->mock.cache_block, "prefix-cache block (0 = no cache)");
  mock->add_option("--threads", a->mock.threads, "connection threads");
  mock->add_option("--tokenizer", a->tokenizer, "count text prompts with this tokenizer");
  mock->add_option("--reasoning-words", a->mock.reasoning_words,
                   "reasoning tokens streamed before each chat/messages/responses answer");

  VerbRun offline = SetupBenchOffline(*bench);
  CLI::App* offline_cmd = bench->get_subcommand("offline");

  return [a, serve, sweep, single, ses, mock, offline, offline_cmd]() -> int {
    if (serve->parsed()) return RunServe(*a, serve);
    if (sweep->parsed()) return RunSweepCmd(*a, sweep, CommandLine());
    if (single->parsed()) {
      if (single->get_option("--endpoint")->count() == 0) a->endpoint = "chat";
      return RunSingle(*a, single);
    }
    if (ses->parsed()) return RunSessionsCmd(*a, ses, CommandLine());
    if (mock->parsed()) return RunMock(*a);
    if (offline_cmd->parsed()) return offline();
    return Fail("bench: give serve, sweep, single-stream, sessions, mock-server or offline");
  };
}

MX_REGISTER_VERB(bench, "bench", 50, SetupBench);

}  // namespace
}  // namespace mx::cli
