// Server lifecycle (bind, run, drain) and the small routes: /health, /health_generate,
// /v1/models, /metrics, /get_server_info, /tokenize, /detokenize, /flush_cache,
// /abort_request, the web page; auth and error pages.
#include "server/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "base/log.h"
#include "server/server_impl.h"
#include "server/server_info.h"
#include "server/webui.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

void HttpServer::RaiseBacklog(int backlog) {
  // note: httplib listens with a backlog of 5; calling listen() again on a listening socket
  // only changes its backlog, so bursts of hundreds of connects are not dropped.
  ::listen(svr_sock_, backlog);
}

void HttpServer::StopAccepting() { ::shutdown(svr_sock_, SHUT_RDWR); }

namespace {
int PortOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  return -1;
}
}  // namespace

int HttpServer::EndKeepAlive(int port, const std::multiset<std::pair<std::string, int>>& busy) {
  // note: httplib 0.11 offers no hook on accepted sockets, so they are found among this
  // process's descriptors: stream sockets, not listening, whose local port is ours.
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int n = 0;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const int fd = static_cast<int>(std::strtol(e->d_name, &end, 10));
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0, listening = 0;
    socklen_t len = sizeof(type);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
      continue;
    }
    len = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening != 0) {
      continue;
    }
    sockaddr_storage addr{};
    len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      continue;
    }
    if (PortOf(addr) != port) continue;
    sockaddr_storage peer{};
    len = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
      continue;
    }
    char host[INET6_ADDRSTRLEN] = "";
    const void* a =
        peer.ss_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&peer)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr);
    ::inet_ntop(peer.ss_family, a, host, sizeof(host));
    if (busy.count({host, PortOf(peer)}) > 0) continue;
    if (::shutdown(fd, SHUT_RD) == 0) ++n;
  }
  ::closedir(dir);
  return n;
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.http_status == 429) res.set_header("Retry-After", "1");
  res.set_content(e.Body(), "application/json");
}

void SendJson(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

std::string NewResponseId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  const uint64_t n = counter.fetch_add(1);
  return fmt::format("{}{:016x}{:08x}", prefix, salt ^ (n * 0xD6E8FEB86659FD93ull), n & 0xffffffff);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<ApiError> Server::Impl::FindModel(const std::string& name, ServedModel** out) {
  if (name.empty()) {
    *out = default_model;
    return std::nullopt;
  }
  std::string names;
  for (const auto& m : models) {
    if (m->name == name) {
      *out = m.get();
      return std::nullopt;
    }
    names += (names.empty() ? "" : ", ") + m->name;
  }
  return NotFoundError("model", fmt::format("model '{}' not found; served: {}", name, names),
                       "model_not_found");
}

bool Server::Impl::DeadlinePassed() const {
  const int64_t d = drain_deadline_ns.load();
  return d != 0 && Clock::now().time_since_epoch().count() > d;
}

std::string Server::Impl::EngineFailure() const {
  for (const auto& m : models) {
    if (Status h = m->engine->Health(); !h.ok()) return m->name + ": " + h.message();
  }
  return "";
}

void Server::Impl::RegisterJob(const std::string& id, ActiveJob* job) {
  std::lock_guard<std::mutex> lock(jobs_mu);
  jobs[id] = job;
}

void Server::Impl::UnregisterJob(const std::string& id) {
  std::lock_guard<std::mutex> lock(jobs_mu);
  jobs.erase(id);
}

std::shared_ptr<void> Server::Impl::MarkBusy(const httplib::Request& req) {
  std::pair<std::string, int> peer{req.remote_addr, req.remote_port};
  {
    std::lock_guard<std::mutex> lock(jobs_mu);
    busy_peers.insert(peer);
  }
  return std::shared_ptr<void>(nullptr, [this, peer](void*) {
    {
      std::lock_guard<std::mutex> lock(jobs_mu);
      busy_peers.erase(busy_peers.find(peer));
    }
    if (draining.load()) EndIdleConnections();
  });
}

void Server::Impl::EndIdleConnections() {
  std::multiset<std::pair<std::string, int>> busy;
  {
    std::lock_guard<std::mutex> lock(jobs_mu);
    busy = busy_peers;
  }
  const int ended = http.EndKeepAlive(bound_port, busy);
  MX_LOG_DEBUG("shutdown: half-closed {} idle client connection(s), {} busy", ended, busy.size());
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { Shutdown(); }

int Server::port() const { return impl_->bound_port; }

void Server::AddModel(std::unique_ptr<ServedModel> model) {
  impl_->models.push_back(std::move(model));
}

Status Server::SetReady() {
  Impl& s = *impl_;
  if (s.models.empty()) return FailedPrecondition("no models to serve");
  s.default_model = s.models.front().get();
  if (!s.options.default_model.empty()) {
    ServedModel* m = nullptr;
    if (auto e = s.FindModel(s.options.default_model, &m)) {
      return InvalidArgument("--default-model: {}", e->message);
    }
    s.default_model = m;
  }
  s.ready.store(true);
  return Status::Ok();
}

namespace {

std::optional<ApiError> ReadBody(const httplib::Request& req, Json* body) {
  if (req.body.empty()) {
    *body = Json::object();
    return std::nullopt;
  }
  return ParseBody(req.body, body);
}

}  // namespace

Status Server::Bind() {
  Impl& s = *impl_;
  auto& http = s.http;
  const int threads = std::max(4, s.options.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(s.options.max_body_bytes);
  http.set_keep_alive_timeout(5);
  http.set_read_timeout(60);
  http.set_write_timeout(30);
  http.set_tcp_nodelay(true);

  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    // note: the page's own files are public (they hold no data), so that a browser can load
    // it and then ask for the key; everything the page calls needs the key.
    if (s.options.api_key.empty() || req.path == "/health" ||
        (s.options.webui && req.method == "GET" && FindWebAsset(req.path))) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + s.options.api_key) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    e.message =
        auth.empty() ? "missing API key: send 'Authorization: Bearer KEY'" : "invalid API key";
    SendError(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.http_status = res.status;
    if (res.status == 404) {
      e.message = fmt::format("no route {} {}", req.method, req.path);
      e.code = "not_found";
    } else if (res.status == 413) {
      e.message = "the request body is larger than the server accepts";
      e.code = "request_too_large";
    } else {
      e.message = fmt::format("HTTP {}", res.status);
    }
    res.set_content(e.Body(), "application/json");
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        MX_LOG_ERROR("request handler threw: {}", what);
        SendError(res, FromStatus(Internal("{}", what)));
      });
  http.set_logger([&s](const httplib::Request&, const httplib::Response& res) {
    s.metrics.CountHttp(res.status);
  });

  http.Post("/v1/chat/completions",
            [&s](const httplib::Request& q, httplib::Response& r) { s.HandleChat(q, r); });
  http.Post("/v1/completions",
            [&s](const httplib::Request& q, httplib::Response& r) { s.HandleCompletion(q, r); });
  http.Post("/generate",
            [&s](const httplib::Request& q, httplib::Response& r) { s.HandleGenerate(q, r); });

  // Both answer 503 with the reason while loading or draining and once an engine has failed
  // (its model runner broke: Engine::Health), so a load balancer stops sending requests here.
  http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    std::string why;
    if (!s.ready.load() || s.draining.load()) {
      why = s.draining.load() ? "shutting down" : "loading";
    } else {
      why = s.EngineFailure();
    }
    if (!why.empty()) {
      res.status = 503;
      res.set_content(why + "\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/health_generate", [&s](const httplib::Request&, httplib::Response& res) {
    std::string why = s.draining.load() ? "shutting down" : "loading";
    if (s.ready.load() && !s.draining.load()) {
      why = s.EngineFailure();
      if (why.empty() && s.HealthGenerate(&why)) {
        res.set_content("ok\n", "text/plain");
        return;
      }
    }
    res.status = 503;
    res.set_content(why + "\n", "text/plain");
  });
  http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
    Json data = Json::array();
    if (s.ready.load()) {
      for (const auto& m : s.models) {
        data.push_back(Json{{"id", m->name},
                            {"object", "model"},
                            {"created", m->created},
                            {"owned_by", "mxserve"},
                            {"root", m->dir},
                            {"max_model_len", m->engine->context_window()}});
      }
    }
    SendJson(res, Json{{"object", "list"}, {"data", std::move(data)}});
  });
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    std::vector<ServerMetrics::ModelView> views;
    if (s.ready.load()) {
      for (const auto& m : s.models)
        views.push_back({m->name, &m->metrics, m->engine->Stats(), m->engine->kernel_tuning()});
    }
    res.set_content(s.metrics.Render(views), "text/plain; version=0.0.4");
  });
  http.Get("/get_server_info", [&s](const httplib::Request&, httplib::Response& res) {
    ServerState st;
    st.ready = s.ready.load();
    st.draining = s.draining.load();
    st.auth = !s.options.api_key.empty();
    st.uptime_seconds = std::chrono::duration<double>(Clock::now() - s.started).count();
    if (st.ready) st.default_model = s.default_model->name;
    SendJson(res, ServerInfoJson(st, s.models));
  });
  if (s.options.webui) {
    http.Get("/|/webui/[a-z]+\\.(css|js)", [](const httplib::Request& req, httplib::Response& res) {
      const WebAsset* a = FindWebAsset(req.path);
      if (a == nullptr) {
        res.status = 404;  // the error handler writes the body
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      // Everything the page loads or calls is this server; nothing inline, nothing elsewhere.
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
      res.set_content(std::string(a->body), std::string(a->content_type));
    });
  }
  http.Post("/tokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!s.ready.load())
      return SendError(res, FromStatus(Status(StatusCode::kUnavailable, "loading")));
    Json body;
    if (auto e = ReadBody(req, &body)) return SendError(res, *e);
    ServedModel* m = nullptr;
    std::string model =
        body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
    if (auto e = s.FindModel(model, &m)) return SendError(res, *e);
    std::string text;
    if (body.contains("prompt") && body["prompt"].is_string()) {
      text = body["prompt"].get<std::string>();
    } else if (body.contains("text") && body["text"].is_string()) {
      text = body["text"].get<std::string>();
    } else if (body.contains("messages")) {
      ParsedRequest pr;
      if (auto e = ParseChatRequest(body, s.options.limits, &pr)) return SendError(res, *e);
      if (!m->chat_template)
        return SendError(res, BadRequest("messages", "the model has no chat template"));
      ChatRequest cr;
      cr.messages = pr.messages;
      cr.tools = pr.tools;
      cr.kwargs = pr.chat_template_kwargs;
      cr.bos_token = m->bos_token;
      cr.eos_token = m->eos_token;
      auto r = m->chat_template->Render(MakeChatContext(cr));
      if (!r.ok()) return SendError(res, BadRequest("messages", r.status().message()));
      text = *r;
    } else {
      return SendError(res, BadRequest("prompt", "'prompt' (a string) or 'messages' is required"));
    }
    std::vector<int32_t> ids = m->tokenizer.Encode(text);
    SendJson(res, Json{{"tokens", ids},
                       {"count", ids.size()},
                       {"max_model_len", m->engine->context_window()}});
  });
  http.Post("/detokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!s.ready.load())
      return SendError(res, FromStatus(Status(StatusCode::kUnavailable, "loading")));
    Json body;
    if (auto e = ReadBody(req, &body)) return SendError(res, *e);
    ServedModel* m = nullptr;
    std::string model =
        body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
    if (auto e = s.FindModel(model, &m)) return SendError(res, *e);
    auto it = body.find("tokens");
    if (it == body.end() || !it->is_array()) {
      return SendError(res, BadRequest("tokens", "'tokens' must be an array of token ids"));
    }
    std::vector<int32_t> ids;
    for (const Json& x : *it) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
        return SendError(res, BadRequest("tokens", "'tokens' must be an array of token ids"));
      }
      ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    if (Status st = m->tokenizer.CheckIds(ids); !st.ok()) {
      return SendError(res, BadRequest("tokens", st.message()));
    }
    SendJson(res, Json{{"prompt", m->tokenizer.Decode(ids)}});
  });
  http.Post("/flush_cache", [&s](const httplib::Request&, httplib::Response& res) {
    if (!s.ready.load())
      return SendError(res, FromStatus(Status(StatusCode::kUnavailable, "loading")));
    for (const auto& m : s.models) m->engine->FlushCache();
    res.set_content("Cache flushed.\n", "text/plain");
  });
  http.Post("/abort_request", [&s](const httplib::Request& req, httplib::Response& res) {
    Json body;
    if (auto e = ReadBody(req, &body)) return SendError(res, *e);
    const bool all = body.value("abort_all", false);
    std::string rid =
        body.contains("rid") && body["rid"].is_string() ? body["rid"].get<std::string>() : "";
    if (!all && rid.empty())
      return SendError(res, BadRequest("rid", "give 'rid' or 'abort_all': true"));
    int aborted = 0;
    std::lock_guard<std::mutex> lock(s.jobs_mu);
    for (auto& [id, job] : s.jobs) {
      if (all || id == rid) {
        job->abort.store(true);
        for (RequestId r : job->ids) job->engine->Abort(r);
        ++aborted;
      }
    }
    SendJson(res, Json{{"aborted", aborted}});
  });

  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second server on
  // a busy port binds without an error and the kernel splits the connections between them.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (s.options.port == 0) {
    s.bound_port = http.bind_to_any_port(s.options.host);
    if (s.bound_port <= 0) {
      return IoError("cannot bind {} (any port)", s.options.host);
    }
  } else {
    if (!http.bind_to_port(s.options.host, s.options.port)) {
      return IoError("cannot bind {}:{} (in use, or not a local address?)", s.options.host,
                     s.options.port);
    }
    s.bound_port = s.options.port;
  }
  http.RaiseBacklog(4096);
  return Status::Ok();
}

void Server::Run() {
  impl_->run_called.store(true);
  impl_->http.listen_after_bind();
  impl_->run_finished.store(true);
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.draining.exchange(true)) return;
  const auto deadline = Clock::now() + s.options.shutdown_timeout;
  s.drain_deadline_ns.store(deadline.time_since_epoch().count());
  // stop() is a no-op until listen has started; wait for Run to get there.
  while (s.run_called.load() && !s.run_finished.load() && !s.http.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s.http.StopAccepting();
  s.EndIdleConnections();
}

}  // namespace mx::server
