// Internal to the server module: the state shared by server.cpp (lifecycle, small routes) and
// generation.cpp (chat, completions, /generate).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <httplib.h>

#include "server/api_error.h"
#include "server/metrics.h"
#include "server/server.h"

namespace mx::server {

using Clock = std::chrono::steady_clock;

// httplib::Server with access to its listening socket (to raise the listen backlog).
class HttpServer : public httplib::Server {
 public:
  void RaiseBacklog(int backlog);
  // Closes the listening socket but, unlike stop(), does not flag the server as shutting
  // down, which would cut off responses still streaming: listen() returns once every
  // connection's handler has finished.
  void StopAccepting();
  // Shuts the reading side of the accepted connections on `port` whose peer (address, port)
  // is not in `busy`, and returns how many: an idle keep-alive connection, which httplib would
  // otherwise hold open for its keep-alive timeout, sees end-of-file and closes at once. A
  // streamed response must be in `busy`: httplib ends one whose socket reads end-of-file.
  int EndKeepAlive(int port, const std::multiset<std::pair<std::string, int>>& busy);
};

// Engine requests belonging to one HTTP request, for /abort_request and shutdown.
struct ActiveJob {
  Engine* engine = nullptr;
  std::vector<RequestId> ids;
  std::atomic<bool> abort{false};
};

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  ServerOptions options;
  HttpServer http;
  int bound_port = 0;
  std::vector<std::unique_ptr<ServedModel>> models;
  ServedModel* default_model = nullptr;
  std::atomic<bool> run_called{false};
  std::atomic<bool> run_finished{false};
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> drain_deadline_ns{0};  // steady clock; 0 = none
  ServerMetrics metrics;
  Clock::time_point started = Clock::now();

  std::mutex jobs_mu;
  std::map<std::string, ActiveJob*> jobs;  // by response id ("chatcmpl-...", rid)
  // Peers (address, port) of connections with a generation in progress: shutdown ends every
  // other connection's keep-alive (HttpServer::EndKeepAlive), and these once they finish.
  std::multiset<std::pair<std::string, int>> busy_peers;  // guarded by jobs_mu

  // The model a request names ("" = default), or a 404 listing the served ones.
  std::optional<ApiError> FindModel(const std::string& name, ServedModel** out);
  bool DeadlinePassed() const;
  void RegisterJob(const std::string& id, ActiveJob* job);
  void UnregisterJob(const std::string& id);
  // Marks the request's connection busy until the returned handle is released (held by a
  // streamed response's releaser, so past its last byte). Call before checking `draining`.
  std::shared_ptr<void> MarkBusy(const httplib::Request& req);
  // Half-closes every connection not busy (after draining has begun).
  void EndIdleConnections();

  void HandleChat(const httplib::Request& req, httplib::Response& res);
  void HandleCompletion(const httplib::Request& req, httplib::Response& res);
  void HandleGenerate(const httplib::Request& req, httplib::Response& res);
  // Runs a one-token generation on every model; false (with a reason) on failure.
  bool HealthGenerate(std::string* why);
  // "model: reason" for the first model whose engine has failed (Engine::Health); "" if none.
  std::string EngineFailure() const;
};

void SendError(httplib::Response& res, const ApiError& e);
void SendJson(httplib::Response& res, const nlohmann::ordered_json& body, int status = 200);
// A unique response id with the given prefix ("chatcmpl-", "cmpl-").
std::string NewResponseId(const char* prefix);
int64_t UnixNow();

}  // namespace mx::server
