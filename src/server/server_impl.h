// Internal to the server module: the state shared by server.cpp (lifecycle, small routes),
// generation.cpp (chat, completions, /generate, /v1/messages, /v1/responses) and
// responses_routes.cpp (the stored responses).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/server.h"

namespace mx::server {

using Clock = std::chrono::steady_clock;

// Engine requests belonging to one HTTP request, for /abort_request and shutdown.
struct ActiveJob {
  Engine* engine = nullptr;
  std::vector<RequestId> ids;
  std::atomic<bool> abort{false};
};

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)), responses(options.responses_store) {}

  ServerOptions options;
  std::unique_ptr<HttpServer> http;
  int bound_port = 0;
  std::vector<std::unique_ptr<ServedModel>> models;
  ServedModel* default_model = nullptr;
  std::atomic<bool> run_called{false};
  std::atomic<bool> run_finished{false};
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> drain_deadline_ns{0};  // steady clock; 0 = none
  ServerMetrics metrics;
  ResponseStore responses;  // /v1/responses with store (response_store.h)
  Clock::time_point started = Clock::now();

  // jobs_mu also guards each job's ActiveJob::ids (appended by the job's thread, read by
  // /abort_request).
  Mutex jobs_mu;
  std::map<std::string, ActiveJob*> jobs
      GUARDED_BY(jobs_mu);  // by response id ("chatcmpl-...", rid)

  // The model a request names ("" = default), or a 404 listing the served ones.
  std::optional<ApiError> FindModel(const std::string& name, ServedModel** out);
  bool DeadlinePassed() const;
  // False when `id` is taken by a running request (a /generate rid given twice).
  bool RegisterJob(const std::string& id, ActiveJob* job);
  // Removes `id` if it is `job`'s.
  void UnregisterJob(const std::string& id, const ActiveJob* job);

  // Every request: auth, then the route.
  void Handle(HttpExchange& ex);
  void HandleGeneration(ApiKind kind, HttpExchange& ex);
  void HandleHealth(HttpExchange& ex);
  void HandleHealthGenerate(HttpExchange& ex);
  void HandleModels(HttpExchange& ex);
  void HandleMetrics(HttpExchange& ex);
  void HandleServerInfo(HttpExchange& ex);
  void HandleTokenize(HttpExchange& ex);
  void HandleDetokenize(HttpExchange& ex);
  void HandleCountTokens(HttpExchange& ex);  // /v1/messages/count_tokens
  // GET /v1/responses/{id}, GET /v1/responses/{id}/input_items, DELETE /v1/responses/{id}.
  void HandleStoredResponse(HttpExchange& ex);
  void HandleFlushCache(HttpExchange& ex);
  void HandleAbort(HttpExchange& ex);
  // Runs a one-token generation on every model; false (with a reason) on failure.
  bool HealthGenerate(std::string* why);
  // "model: reason" for the first model whose engine has failed (Engine::Health); "" if none.
  std::string EngineFailure() const;
};

void SendError(HttpExchange& ex, const ApiError& e, ErrorShape shape = ErrorShape::kOpenAI);
// Anthropic's error shape on /v1/messages*, OpenAI's elsewhere.
ErrorShape ShapeForPath(const std::string& path);
void SendJson(HttpExchange& ex, const nlohmann::ordered_json& body, int status = 200);
void SendText(HttpExchange& ex, const std::string& text, int status = 200);
// A unique response id with the given prefix ("chatcmpl-", "cmpl-").
std::string NewResponseId(const char* prefix);
int64_t UnixNow();

}  // namespace mx::server
