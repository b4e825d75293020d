// `mxserve serve MODEL_DIR | --model NAME=DIR ...`: the OpenAI- and Anthropic-compatible HTTP
// server (see server/server.h). Engine flags carry sglang's names. The port answers /health
// with 503 while the models load; SIGTERM or SIGINT stops accepting, lets running requests
// finish up to --shutdown-timeout, and exits 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "base/log.h"
#include "base/meminfo.h"
#include "cli/cli_util.h"
#include "cli/serve_plan.h"
#include "cli/served_model_info.h"
#include "cli/verb.h"
#include "engine/dp_engine.h"
#include "engine/model_factory.h"
#include "engine/tp_runner.h"
#include "grammar/constraint.h"
#include "kv/paged_kv_store.h"
#include "parallel/mpi_communicator.h"
#include "server/server.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string model_dir;
  std::string served_model_name;
  std::vector<std::string> models;  // NAME=DIR[,chat-template=FILE]
  std::string chat_template;        // --chat-template: for every model without its own
  server::ServerOptions server;
  // The server paces running streams while prompts prefill (the engine's own default is off,
  // so its tests keep fixed chunks): at 100 ms the streams keep >= 10 tok/s (p99 gap ~117 ms
  // while a 6,000-token prompt prefills, 8x lower than unpaced) and that prompt's TTFT is
  // 1.4-1.5x its TTFT alone; 150 ms trades 7 tok/s for 1.3x (docs/performance.md).
  EngineOptions engine = [] {
    EngineOptions e;
    e.max_decode_gap_ms = 100;
    return e;
  }();
  double shutdown_timeout_s = 30;
  std::string api_key_file;
  // HTTP deadlines in seconds (server::HttpLimits holds them in ms).
  double head_timeout_s = 10, body_timeout_s = 60, idle_timeout_s = 5, write_timeout_s = 30;
  double sse_keepalive_s = 4;  // --sse-keepalive-interval
  int dp = 1;                  // engine replicas per model (engine/dp_engine.h)
  std::string load_balance_method = "round_robin";
  int tp = 0;  // tensor-parallel ranks (0: not given)
  int ep = 0;  // expert-parallel ranks (0: not given)
  // The memory plan (serve_plan.h): --dry-run prints it (--json as JSON) and exits;
  // --available-memory plans against that many bytes instead of MemAvailable.
  bool dry_run = false;
  bool plan_json = false;
  int64_t available_memory = 0;
};

// The API key from --api-key, --api-key-file (first line; a file keeps it out of `ps`) or the
// MXSERVE_API_KEY environment variable, in that order; at most one of the flags.
Status ResolveApiKey(ServeArgs& a) {
  if (!a.api_key_file.empty()) {
    if (!a.server.api_key.empty()) {
      return InvalidArgument("give --api-key or --api-key-file, not both");
    }
    std::FILE* f = std::fopen(a.api_key_file.c_str(), "rb");
    if (f == nullptr) return IoError("--api-key-file {}: cannot open it", a.api_key_file);
    std::string key;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && key.size() < 65536) key.append(buf, n);
    std::fclose(f);
    key = key.substr(0, key.find_first_of("\r\n"));
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty())
      return InvalidArgument("--api-key-file {}: the first line is empty", a.api_key_file);
    a.server.api_key = key;
  } else if (a.server.api_key.empty()) {
    if (const char* env = std::getenv("MXSERVE_API_KEY"); env != nullptr) a.server.api_key = env;
  }
  return Status::Ok();
}

// The size of the group under `mpirun` (Open MPI sets OMPI_COMM_WORLD_SIZE), else 0.
int MpiWorldSize() {
  const char* s = std::getenv("OMPI_COMM_WORLD_SIZE");
  return s == nullptr ? 0 : std::atoi(s);
}

// --tp / --ep into the engine options: one group of max(tp, ep) ranks, MoE by whole experts
// with --ep. Errors name the flags.
Status ResolveParallel(const ServeArgs& a, EngineOptions& e) {
  if (a.tp < 0 || a.ep < 0) return InvalidArgument("--tp and --ep must be >= 1");
  if (a.tp > 0 && a.ep > 0 && a.tp != a.ep) {
    return InvalidArgument(
        "--tp {} --ep {}: the expert-parallel group is the tensor-parallel group (attention by "
        "heads, MoE by whole experts over the same ranks), so give one size",
        a.tp, a.ep);
  }
  e.tp = std::max({1, a.tp, a.ep});
  e.expert_parallel = a.ep > 1;
  return Status::Ok();
}

// A non-zero rank under mpirun: load this rank's shard and run rank 0's steps until it stops.
int RunMpiWorker(const std::string& dir, const EngineOptions& e, Communicator& comm) {
  // SIGTERM / SIGINT from mpirun reach every rank: rank 0 drains and then tells the workers to
  // stop, so the workers wait for that.
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  const ModelShard shard{comm.rank(), comm.size(), e.expert_parallel};
  ModelLoadOptions lo = e.model;
  lo.model_dir = dir;
  lo.shard = shard;
  lo.tokenizer = TokenizerLoad::kNone;
  auto m = LoadModel(lo);
  if (!m.ok()) return Fail(fmt::format("rank {}: {}", comm.rank(), m.status().message()));
  std::fprintf(stderr, "mxserve: rank %d of %d (%s) loaded; running rank 0's steps\n", comm.rank(),
               comm.size(), shard.Describe().c_str());
  Status st = RunTpWorker(*m->model, comm, *m->kernels, Globals().threads, m->moe);
  if (!st.ok()) return Fail(fmt::format("rank {}: {}", comm.rank(), st.message()));
  return 0;
}

struct ModelEntry {
  std::string name;
  std::string dir;
  std::string chat_template;  // "": the checkpoint's (or --chat-template)
  int64_t kv_tokens = 0;      // the memory plan's KV budget (--max-total-tokens or automatic)
};

Result<std::vector<ModelEntry>> ModelList(const ServeArgs& a) {
  std::vector<ModelEntry> out;
  if (!a.model_dir.empty()) {
    std::string name = a.served_model_name;
    if (name.empty()) name = fs::path(a.model_dir).lexically_normal().filename().string();
    if (name.empty()) name = fs::absolute(a.model_dir).parent_path().filename().string();
    out.push_back({name, a.model_dir, a.chat_template});
  }
  constexpr std::string_view kTemplateOpt = ",chat-template=";
  for (const std::string& m : a.models) {
    size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
      return InvalidArgument("--model '{}': expected NAME=DIR[,chat-template=FILE]", m);
    }
    ModelEntry e{m.substr(0, eq), m.substr(eq + 1), a.chat_template};
    if (size_t t = e.dir.find(kTemplateOpt); t != std::string::npos) {
      e.chat_template = e.dir.substr(t + kTemplateOpt.size());
      e.dir.resize(t);
      if (e.dir.empty() || e.chat_template.empty()) {
        return InvalidArgument("--model '{}': expected NAME=DIR[,chat-template=FILE]", m);
      }
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return InvalidArgument("give MODEL_DIR or at least one --model NAME=DIR");
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (out[i].name == out[j].name) {
        return InvalidArgument("model name '{}' is given twice", out[i].name);
      }
    }
  }
  return out;
}

// Every flag that needs more than CLI11's checks (models, API key, timeouts, --dp and its
// method, --tp / --ep) resolved into `a`; errors name the flag.
Status ResolveServeArgs(ServeArgs& a, LoadBalanceMethod* method) {
  MX_RETURN_IF_ERROR(ResolveApiKey(a));
  auto ms = [](double s) { return std::chrono::milliseconds(std::llround(s * 1000)); };
  a.server.http.head_timeout = ms(a.head_timeout_s);
  a.server.http.body_timeout = ms(a.body_timeout_s);
  a.server.http.idle_timeout = ms(a.idle_timeout_s);
  a.server.http.write_timeout = ms(a.write_timeout_s);
  a.server.shutdown_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout_s * 1000));
  a.server.sse_keepalive = std::max(ms(a.sse_keepalive_s), std::chrono::milliseconds(1));
  if (a.dp < 1) return InvalidArgument("--dp must be >= 1, got {}", a.dp);
  MX_ASSIGN_OR_RETURN(*method, ParseLoadBalanceMethod(a.load_balance_method));
  return ResolveParallel(a, a.engine);
}

// One model's engine (--dp replicas), tokenizer, chat template and what the status page says
// of it.
Result<std::unique_ptr<server::ServedModel>> LoadModelToServe(const ModelEntry& entry,
                                                              const ServeArgs& a,
                                                              LoadBalanceMethod method) {
  const std::string& name = entry.name;
  const std::string& dir = entry.dir;
  EngineOptions eo = a.engine;
  eo.model.model_dir = dir;
  eo.max_total_tokens = entry.kv_tokens;  // the plan's (what --max-total-tokens gave, or auto)
  eo.threads = Globals().threads;
  auto engine = CreateDpEngine(eo, a.dp, {.method = method});
  if (!engine.ok()) {
    return Status(engine.status().code(),
                  fmt::format("model '{}' ({}): {}", name, dir, engine.status().message()));
  }
  auto served = server::LoadServedModel(name, dir, std::move(*engine), entry.chat_template);
  if (!served.ok()) {
    return Status(served.status().code(),
                  fmt::format("model '{}': {}", name, served.status().message()));
  }
  auto info = DescribeServedModel(dir, eo.kv_cache_dtype);
  if (!info.ok()) {
    return Status(info.status().code(),
                  fmt::format("model '{}': {}", name, info.status().message()));
  }
  (*served)->info = std::move(*info);
  const KernelTuningInfo tuning = (*served)->engine->kernel_tuning();
  if (tuning.state == "tuned") {
    (*served)->info.tuned_configs = "MoE: " + tuning.config;
  } else if (tuning.state == "default") {
    (*served)->info.tuned_configs = "none (MoE " + tuning.shape +
                                    " runs the untuned default; tune: " + tuning.tune_command + ")";
  }
  return std::move(*served);
}

// The rank of this process under mpirun (OMPI_COMM_WORLD_RANK), else -1.
int MpiRank() {
  const char* s = std::getenv("OMPI_COMM_WORLD_RANK");
  return s == nullptr || MpiWorldSize() <= 1 ? -1 : std::atoi(s);
}

// The memory plan of every model before anything is loaded (serve_plan.h): logged, or printed
// by --dry-run; one that does not fit ends the command. Fills each entry's KV budget. Returns
// the exit code when the command ends here, else -1.
int PlanServe(const ServeArgs& a, std::vector<ModelEntry>& models) {
  MemoryPlanOptions base;
  const EngineOptions& e = a.engine;
  base.tp = e.tp;
  base.expert_parallel = e.expert_parallel;
  base.dp = a.dp;
  base.mpi_rank = MpiRank();
  base.kv_cache_dtype = KvCacheDtypeName(e.kv_cache_dtype);
  base.max_total_tokens = e.max_total_tokens;
  base.mem_fraction = e.mem_fraction;
  base.page_size = e.page_size;
  base.chunked_prefill_size = e.chunked_prefill_size;
  base.max_running_requests = e.max_running_requests;
  base.threads = Globals().threads;
  std::vector<std::pair<std::string, std::string>> dirs;
  for (const ModelEntry& m : models) dirs.emplace_back(m.name, m.dir);
  const std::optional<int64_t> avail =
      a.available_memory > 0 ? std::optional<int64_t>(a.available_memory) : AvailableMemoryBytes();
  auto plans = PlanModels(dirs, base, avail);
  if (!plans.ok()) {
    std::fprintf(stderr, "mxserve serve: %s\n", plans.status().message().c_str());
    return 2;
  }
  const Status fit = avail ? CheckPlansFit(*plans, *avail) : Status::Ok();
  if (a.dry_run) {
    if (a.plan_json) {
      std::printf("%s\n", PlansJson(*plans, avail, fit).c_str());
    } else {
      for (const MemoryPlan& p : *plans) std::printf("%s\n", DescribePlan(p).c_str());
      std::printf("%s\n", fit.ok() ? "fits" : fit.message().c_str());
    }
    return fit.ok() ? 0 : 1;
  }
  for (const MemoryPlan& p : *plans) MX_LOG_INFO("{}", DescribePlan(p));
  if (!fit.ok()) return Fail(fit.message());
  for (size_t i = 0; i < models.size(); ++i) models[i].kv_tokens = (*plans)[i].kv.tokens;
  return -1;
}

// The ready line with a request to paste, and the web page's address.
void PrintReady(const ServeArgs& a, size_t n_models, int port) {
  const std::string auth = a.server.api_key.empty() ? "" : " -H 'Authorization: Bearer KEY'";
  std::fprintf(
      stderr,
      "mxserve: ready, serving %zu model(s) on http://%s:%d\n"
      "  curl http://%s:%d/v1/chat/completions%s -H 'Content-Type: application/json' "
      "-d '{\"messages\":[{\"role\":\"user\",\"content\":\"Anna has 37 stickers. She buys 48 "
      "more and gives away 29. How many stickers does she have now?\"}],\"max_tokens\":128,"
      "\"temperature\":0,\"chat_template_kwargs\":{\"enable_thinking\":false}}'\n",
      n_models, a.server.host.c_str(), port, a.server.host.c_str(), port, auth.c_str());
  if (a.server.webui) {
    std::fprintf(stderr, "  web page (status + chat): http://%s:%d/\n", a.server.host.c_str(),
                 port);
  }
}

int RunServe(ServeArgs& a) {
  auto models = ModelList(a);
  LoadBalanceMethod method{};
  Status st = models.ok() ? ResolveServeArgs(a, &method) : models.status();
  if (!st.ok()) {
    std::fprintf(stderr, "mxserve serve: %s\n", st.message().c_str());
    return 2;
  }
  if (const int code = PlanServe(a, *models); code >= 0) return code;
  // Signals are taken by one waiting thread; every thread started from here inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Under mpirun the group is the MPI job: every rank loads its shard, rank 0 also serves.
  // (After the mask: the threads MPI starts must not take SIGTERM either.)
  std::unique_ptr<Communicator> mpi;
  if (const int world = MpiWorldSize(); world > 1) {
    if (world != a.engine.tp || a.dp != 1 || models->size() != 1) {
      std::fprintf(stderr,
                   "mxserve serve: under mpirun -np %d: give --tp %d (or --ep %d), one model and "
                   "no --dp (got --tp %d, --dp %d, %zu models)\n",
                   world, world, world, a.engine.tp, a.dp, models->size());
      return 2;
    }
    auto comm = CreateMpiCommunicator();
    if (!comm.ok()) return Fail(comm.status().message());
    mpi = std::move(comm).value();
    if (mpi->rank() != 0) return RunMpiWorker(models->front().dir, a.engine, *mpi);
    a.engine.tp_comm = mpi.get();
  }

  server::Server srv(a.server);
  if (Status bind = srv.Bind(); !bind.ok()) return Fail(bind.message());
  std::fprintf(stderr, "mxserve: listening on http://%s:%d (loading models)\n",
               a.server.host.c_str(), srv.port());
  std::thread http([&] { srv.Run(); });
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "mxserve: %s: draining (up to %.0f s), then exiting\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", a.shutdown_timeout_s);
    srv.Shutdown();
  });
  auto stop = [&](const std::string& why) {
    Fail(why);
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    http.join();
    return 1;
  };

  std::vector<Engine*> engines;
  for (const ModelEntry& entry : *models) {
    auto served = LoadModelToServe(entry, a, method);
    if (!served.ok()) return stop(served.status().message());
    engines.push_back((*served)->engine.get());
    srv.AddModel(std::move(*served));
  }
  if (Status ready = srv.SetReady(); !ready.ok()) return stop(ready.message());
  PrintReady(a, models->size(), srv.port());
  waiter.join();
  http.join();
  for (Engine* e : engines) e->Shutdown(std::chrono::milliseconds(1000));
  std::fprintf(stderr, "mxserve: stopped\n");
  return 0;
}

VerbRun SetupServe(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand("serve",
                                 "OpenAI- and Anthropic-compatible HTTP server (chat, completions, "
                                 "responses, messages, /generate, /metrics)");
  sub->add_option("model_dir", a->model_dir, "Hugging Face checkpoint directory");
  sub->add_option("--served-model-name", a->served_model_name,
                  "name of MODEL_DIR in requests (default: the directory name)");
  sub->add_option("--model", a->models,
                  "serve another model: NAME=DIR, or NAME=DIR,chat-template=FILE (repeatable)");
  sub->add_option("--chat-template", a->chat_template,
                  "a Jinja chat template file used instead of the checkpoint's (every model "
                  "without its own ,chat-template=)");
  sub->add_option("--default-model", a->server.default_model,
                  "model for requests that name none (default: the first)");
  sub->add_option("--host", a->server.host)->capture_default_str();
  sub->add_option("--port", a->server.port, "0 = any free port")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  sub->add_option("--api-key", a->server.api_key,
                  "require 'Authorization: Bearer KEY' (except /health); visible in `ps`: "
                  "prefer --api-key-file or MXSERVE_API_KEY");
  sub->add_option("--api-key-file", a->api_key_file,
                  "read the API key from the first line of this file");
  sub->add_flag("--no-webui{false}", a->server.webui,
                "do not serve the status + chat page at / (the API is unchanged)");
  server::HttpLimits& h = a->server.http;
  sub->add_option("--max-request-bytes", h.max_body_bytes,
                  "request body size limit, chunked bodies included (beyond: 413)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40))
      ->capture_default_str();
  sub->add_option("--max-header-bytes", h.max_header_bytes,
                  "request line + headers size limit (beyond: 431)")
      ->check(CLI::Range(size_t{256}, size_t{1} << 24))
      ->capture_default_str();
  sub->add_option("--max-headers", h.max_headers, "header fields per request (beyond: 431)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--max-json-depth", a->server.limits.max_json_depth,
                  "nesting of arrays and objects in a request body (beyond: 400)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--http-head-timeout", a->head_timeout_s,
                  "seconds for a whole request head, from its first byte (beyond: 408)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--http-body-timeout", a->body_timeout_s,
                  "seconds for a whole request body, after its head (beyond: 408)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--keep-alive-timeout", a->idle_timeout_s,
                  "seconds an idle connection waits for its next request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--http-write-timeout", a->write_timeout_s,
                  "seconds a client may leave one response write unread before it is dropped")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--max-connections", h.max_connections,
                  "open connections (beyond: the oldest idle one is closed, else 503)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--max-connections-per-client", h.max_connections_per_client,
                  "open connections per client address (likewise)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--http-threads", h.max_handlers,
                  "requests handled at once, each on a thread of its own (beyond: 503); idle and "
                  "slow connections take none")
      ->check(CLI::Range(4, 65536))
      ->capture_default_str();
  sub->add_option("--shutdown-timeout", a->shutdown_timeout_s,
                  "seconds running requests may take to finish after SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--sse-keepalive-interval", a->sse_keepalive_s,
                  "seconds a stream may stay quiet (a long prefill) before a keep-alive: an SSE "
                  "comment, Anthropic's ping, Responses' response.in_progress")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  // Agent sessions: reasoning kept in the history, thinking budgets, tool-call constraint.
  sub->add_flag("--clear-thinking", a->server.clear_thinking,
                "render templates that take clear_thinking (GLM-4.7, GLM-5.x) with it true when a "
                "request does not say: earlier turns' reasoning is dropped (default: kept, so "
                "prompts only grow and the prefix cache holds every previous turn)");
  sub->add_flag("--no-tool-call-constraint{false}", a->server.tool_call_constraint,
                "under tool_choice auto, leave a tool call the model opens unconstrained (default: "
                "the rest of the call follows the declared tools' grammar, so it parses)");
  server::EffortBudgets& eb = a->server.effort_budgets;
  sub->add_option("--reasoning-budget-low", eb.low,
                  "thinking budget in tokens for reasoning effort low (0: unbounded)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--reasoning-budget-medium", eb.medium,
                  "thinking budget in tokens for reasoning effort medium (0: unbounded)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--reasoning-budget-high", eb.high,
                  "thinking budget in tokens for reasoning effort high and xhigh (0: unbounded)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  // Structured output: a client's schema, regex or grammar decides these sizes (beyond: 400).
  grammar::GrammarCacheOptions& g = a->server.grammars;
  sub->add_option("--grammar-max-source-bytes", g.limits.max_source_bytes,
                  "size of one schema, regex or grammar text (beyond: 400)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  sub->add_option("--grammar-max-depth", g.limits.max_depth,
                  "nesting in a schema, regex or grammar (beyond: 400)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--grammar-max-elements", g.limits.max_elements,
                  "elements a compiled grammar may have (beyond: 400)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 30))
      ->capture_default_str();
  sub->add_option("--grammar-max-rules", g.limits.max_rules,
                  "rules a compiled grammar may have (beyond: 400)")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 30))
      ->capture_default_str();
  sub->add_option("--grammar-max-repeat", g.limits.max_repeat,
                  "a bounded repetition's upper bound (maxLength, maxItems, {m,n}; beyond: 400)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  sub->add_option("--grammar-cache-size", g.capacity,
                  "compiled grammars kept per model (least recently used dropped)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  sub->add_option("--grammar-mask-cache-entries", g.masks.max_entries,
                  "cached token masks per compiled grammar (past it masks are computed each step)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->capture_default_str();
  sub->add_option("--grammar-shared-mask-bytes", g.masks.shared_max_bytes,
                  "bytes of token masks shared across grammars per model")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  server::ResponseStoreLimits& rs = a->server.responses_store;
  sub->add_option("--responses-store-max-count", rs.max_count,
                  "/v1/responses kept for GET and previous_response_id (least recently used "
                  "evicted; 0: none)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30))
      ->capture_default_str();
  sub->add_option("--responses-store-max-bytes", rs.max_bytes,
                  "bytes of JSON the kept responses may hold (least recently used evicted)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 40))
      ->capture_default_str();
  EngineOptions& e = a->engine;
  sub->add_option("--dp", a->dp,
                  "data parallel: engine replicas per model (own KV pool each; threads and the "
                  "KV budget split between them)")
      ->capture_default_str();
  sub->add_option("--tp,--tensor-parallel-size", a->tp,
                  "tensor parallel: attention by heads, FFN and MoE by width over N ranks (threads "
                  "of this process, or the ranks of `mpirun -np N`)");
  sub->add_option("--ep,--expert-parallel-size", a->ep,
                  "expert parallel: as --tp, but MoE by whole experts per rank");
  sub->add_option("--load-balance-method", a->load_balance_method,
                  "--dp request routing: round_robin|least_load|cache_aware")
      ->capture_default_str();
  AddKernelFlags(sub, &e.model.kernels, &e.model.gemm_activations);
  sub->add_option("--tuned-config-dir", e.model.tuned_config_dir,
                  "tuned MoE kernel configs (`mxserve tune moe --output-dir`), searched after the "
                  "shipped configs/moe/");
  sub->add_option("--page-size", e.page_size, "tokens per KV page")->capture_default_str();
  sub->add_option("--max-total-tokens", e.max_total_tokens, "KV capacity in tokens (0: auto)")
      ->capture_default_str();
  sub->add_option("--mem-fraction-static", e.mem_fraction,
                  "fraction of free memory for the KV pool")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  AddParsedOption(sub, "--kv-cache-dtype", &e.kv_cache_dtype, ParseKvCacheDtype,
                  "auto|bf16|fp8_e4m3|fp8_e4m3fnuz (default auto = bf16)");
  auto* dry_run =
      sub->add_flag("--dry-run", a->dry_run,
                    "print the memory plan (weights by format and where they live, KV bytes per "
                    "token x the token budget, scratch, each rank, the total against the available "
                    "memory) and exit without loading: 0 when it fits, 1 when it does not");
  sub->add_flag("--json", a->plan_json, "with --dry-run: the plan as JSON (docs/serving.md)")
      ->needs(dry_run);
  sub->add_option("--available-memory", a->available_memory,
                  "plan against this many bytes (e.g. 64G) instead of this machine's "
                  "MemAvailable: a what-if for --dry-run, and the budget the KV pool is sized from")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option("--max-running-requests", e.max_running_requests)->capture_default_str();
  sub->add_option("--max-queued-requests", e.max_queued_requests, "beyond: 429 with Retry-After")
      ->capture_default_str();
  sub->add_option("--chunked-prefill-size", e.chunked_prefill_size)->capture_default_str();
  sub->add_option("--max-decode-gap-ms", e.max_decode_gap_ms,
                  "while requests decode, cut prefill chunks to what ends a step within this "
                  "(measured costs); 0: off")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddParsedOption(sub, "--schedule-policy", &e.schedule_policy, ParseSchedulePolicy,
                  "fcfs|lpm (default fcfs)");
  sub->add_flag("--disable-radix-cache", e.disable_radix_cache);
  AddParsedOption(sub, "--speculative-algorithm", &e.speculative.algorithm,
                  ParseSpeculativeAlgorithm,
                  "MTP (aliases EAGLE, NEXTN): speculative decoding with the model's MTP layer");
  sub->add_option_function<std::string>(
      "--speculative-num-steps",
      [&e](const std::string& v) {
        if (v == "auto") {
          e.speculative.num_steps.reset();
          return;
        }
        int32_t n = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec != std::errc() || end != v.data() + v.size() || n < 1) {
          throw CLI::ValidationError("--speculative-num-steps",
                                     "expected auto or a count >= 1, got '" + v + "'");
        }
        e.speculative.num_steps = n;
      },
      "draft steps per verify, or auto (the default with an algorithm): the engine picks 0 (off) "
      "to --speculative-num-draft-tokens - 1 (default 5) drafts per decode step from measured "
      "costs and acceptance");
  sub->add_option("--speculative-eagle-topk", e.speculative.eagle_topk, "1 (a draft chain)")
      ->capture_default_str();
  sub->add_option("--speculative-num-draft-tokens", e.speculative.num_draft_tokens,
                  "tokens per verify (0: num_steps + 1)")
      ->capture_default_str();
  return [a]() -> int { return RunServe(*a); };
}

MX_REGISTER_VERB(serve, "serve", 5, SetupServe);

}  // namespace
}  // namespace mx::cli
