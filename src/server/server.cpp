// Server lifecycle (bind, run, drain) and the small routes: /health, /health_generate,
// /v1/models, /metrics, /get_server_info, /tokenize, /detokenize, /flush_cache,
// /abort_request, /v1/messages/count_tokens, the web page; auth (Bearer or x-api-key) and error
// pages (Anthropic's shape on /v1/messages*).
#include "server/server.h"

#include <random>
#include <thread>

#include <fmt/format.h>

#include "base/log.h"
#include "server/anthropic_request.h"
#include "server/server_impl.h"
#include "server/server_info.h"
#include "server/webui.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

void SendError(HttpExchange& ex, const ApiError& e, ErrorShape shape) {
  HttpHeaders extra;
  if (e.http_status == 429) extra.emplace_back("Retry-After", "1");
  ex.Send(e.StatusIn(shape), "application/json", e.Body(shape), extra);
}

void SendJson(HttpExchange& ex, const Json& body, int status) {
  ex.Send(status, "application/json", Dump(body));
}

void SendText(HttpExchange& ex, const std::string& text, int status) {
  ex.Send(status, "text/plain", text);
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

bool Server::Impl::RegisterJob(const std::string& id, ActiveJob* job) {
  MutexLock lock(jobs_mu);
  return jobs.emplace(id, job).second;
}

void Server::Impl::UnregisterJob(const std::string& id, const ActiveJob* job) {
  MutexLock lock(jobs_mu);
  auto it = jobs.find(id);
  if (it != jobs.end() && it->second == job) jobs.erase(it);
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { Shutdown(); }

int Server::port() const { return impl_->bound_port; }

void Server::AddModel(std::unique_ptr<ServedModel> model) {
  model->grammar_options = impl_->options.grammars;
  model->clear_thinking = impl_->options.clear_thinking;
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

ErrorShape ShapeForPath(const std::string& path) {
  return path.starts_with("/v1/messages") ? ErrorShape::kAnthropic : ErrorShape::kOpenAI;
}

namespace {

std::optional<ApiError> ReadBody(const Server::Impl& s, const HttpRequest& req, Json* body) {
  if (req.body.empty()) {
    *body = Json::object();
    return std::nullopt;
  }
  return ParseBody(req.body, body, s.options.limits.max_json_depth);
}

std::string ModelField(const Json& body) {
  return body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>()
                                                             : "";
}

// The body of an error the transport answers by itself (limits, bad framing), in the shape of
// the route the request was for.
std::pair<std::string, std::string> TransportError(int status, const std::string& message,
                                                   const std::string& code,
                                                   const std::string& path) {
  ApiError e;
  e.http_status = status;
  e.message = message;
  e.code = code;
  if (status == 503) e.type = "service_unavailable";
  if (status >= 500 && status != 503) e.type = "internal_server_error";
  return {e.Body(ShapeForPath(path)), "application/json"};
}

}  // namespace

void Server::Impl::Handle(HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  // note: the page's own files are public (they hold no data), so that a browser can load it
  // and then ask for the key; everything the page calls needs the key.
  const bool page = options.webui && req.method == "GET" && FindWebAsset(req.path) != nullptr;
  if (!options.api_key.empty() && req.path != "/health" && !page) {
    // Bearer (OpenAI clients) or x-api-key (Anthropic clients); both compared in constant time.
    const std::string auth = req.Header("Authorization");
    const std::string x_api_key = req.Header("x-api-key");
    const bool bearer_ok = ConstantTimeEquals(auth, "Bearer " + options.api_key);
    const bool x_ok = ConstantTimeEquals(x_api_key, options.api_key);
    if (!bearer_ok && !x_ok) {
      ApiError e;
      e.http_status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      e.message = auth.empty() && x_api_key.empty()
                      ? "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                      : "invalid API key";
      return SendError(ex, e, ShapeForPath(req.path));
    }
  }
  const std::string& m = req.method;
  const std::string& p = req.path;
  if (m == "POST") {
    if (p == "/v1/chat/completions") return HandleGeneration(ApiKind::kChat, ex);
    if (p == "/v1/completions") return HandleGeneration(ApiKind::kCompletion, ex);
    if (p == "/generate") return HandleGeneration(ApiKind::kGenerate, ex);
    if (p == "/v1/messages") return HandleGeneration(ApiKind::kMessages, ex);
    if (p == "/v1/messages/count_tokens") return HandleCountTokens(ex);
    if (p == "/v1/responses") return HandleGeneration(ApiKind::kResponses, ex);
    if (p == "/tokenize") return HandleTokenize(ex);
    if (p == "/detokenize") return HandleDetokenize(ex);
    if (p == "/flush_cache") return HandleFlushCache(ex);
    if (p == "/abort_request") return HandleAbort(ex);
  } else if (m == "DELETE") {
    if (p.starts_with("/v1/responses/")) return HandleStoredResponse(ex);
  } else if (m == "GET") {
    if (p == "/health") return HandleHealth(ex);
    if (p == "/health_generate") return HandleHealthGenerate(ex);
    if (p == "/v1/models") return HandleModels(ex);
    if (p == "/metrics") return HandleMetrics(ex);
    if (p == "/get_server_info") return HandleServerInfo(ex);
    if (p.starts_with("/v1/responses/")) return HandleStoredResponse(ex);
    if (page) {
      const WebAsset* a = FindWebAsset(req.path);
      // Everything the page loads or calls is this server; nothing inline, nothing elsewhere.
      return ex.Send(200, a->content_type, std::string(a->body),
                     {{"Cache-Control", "no-cache"},
                      {"X-Content-Type-Options", "nosniff"},
                      {"Content-Security-Policy",
                       "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"}});
    }
  }
  SendError(ex, NotFoundError("", fmt::format("no route {} {}", m, p), "not_found"),
            ShapeForPath(p));
}

// Both answer 503 with the reason while loading or draining and once an engine has failed (its
// model runner broke: Engine::Health), so a load balancer stops sending requests here.
void Server::Impl::HandleHealth(HttpExchange& ex) {
  std::string why;
  if (!ready.load() || draining.load()) {
    why = draining.load() ? "shutting down" : "loading";
  } else {
    why = EngineFailure();
  }
  if (!why.empty()) return SendText(ex, why + "\n", 503);
  SendText(ex, "ok\n");
}

void Server::Impl::HandleHealthGenerate(HttpExchange& ex) {
  std::string why = draining.load() ? "shutting down" : "loading";
  if (ready.load() && !draining.load()) {
    why = EngineFailure();
    if (why.empty() && HealthGenerate(&why)) return SendText(ex, "ok\n");
  }
  SendText(ex, why + "\n", 503);
}

void Server::Impl::HandleModels(HttpExchange& ex) {
  Json data = Json::array();
  if (ready.load()) {
    for (const auto& m : models) {
      data.push_back(Json{{"id", m->name},
                          {"object", "model"},
                          {"created", m->created},
                          {"owned_by", "mxserve"},
                          {"root", m->dir},
                          {"max_model_len", m->engine->context_window()}});
    }
  }
  SendJson(ex, Json{{"object", "list"}, {"data", std::move(data)}});
}

void Server::Impl::HandleMetrics(HttpExchange& ex) {
  std::vector<ServerMetrics::ModelView> views;
  if (ready.load()) {
    for (const auto& m : models)
      views.push_back({m->name, &m->metrics, m->engine->Stats(), m->engine->kernel_tuning()});
  }
  ex.Send(200, "text/plain; version=0.0.4", metrics.Render(views));
}

void Server::Impl::HandleServerInfo(HttpExchange& ex) {
  ServerState st;
  st.ready = ready.load();
  st.draining = draining.load();
  st.auth = !options.api_key.empty();
  st.uptime_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (st.ready) st.default_model = default_model->name;
  SendJson(ex, ServerInfoJson(st, models));
}

void Server::Impl::HandleTokenize(HttpExchange& ex) {
  if (!ready.load()) return SendError(ex, FromStatus(Status(StatusCode::kUnavailable, "loading")));
  Json body;
  if (auto e = ReadBody(*this, ex.request(), &body)) return SendError(ex, *e);
  ServedModel* m = nullptr;
  if (auto e = FindModel(ModelField(body), &m)) return SendError(ex, *e);
  std::string text;
  if (body.contains("prompt") && body["prompt"].is_string()) {
    text = body["prompt"].get<std::string>();
  } else if (body.contains("text") && body["text"].is_string()) {
    text = body["text"].get<std::string>();
  } else if (body.contains("messages")) {
    ParsedRequest pr;
    if (auto e = ParseChatRequest(body, options.limits, &pr)) return SendError(ex, *e);
    if (!m->chat_template)
      return SendError(ex, BadRequest("messages", "the model has no chat template"));
    auto r = m->RenderChat(pr.messages, pr.tools, pr.chat_template_kwargs);
    if (!r.ok()) return SendError(ex, BadRequest("messages", r.status().message()));
    text = *r;
  } else {
    return SendError(ex, BadRequest("prompt", "'prompt' (a string) or 'messages' is required"));
  }
  std::vector<int32_t> ids = m->tokenizer.Encode(text);
  SendJson(
      ex,
      Json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", m->engine->context_window()}});
}

void Server::Impl::HandleCountTokens(HttpExchange& ex) {
  constexpr ErrorShape kShape = ErrorShape::kAnthropic;
  if (!ready.load()) {
    return SendError(ex, FromStatus(Status(StatusCode::kUnavailable, "loading")), kShape);
  }
  Json body;
  if (auto e = ReadBody(*this, ex.request(), &body)) return SendError(ex, *e, kShape);
  ParsedRequest pr;
  if (auto e = ParseMessagesRequest(body, options.limits, /*count_tokens=*/true, &pr)) {
    return SendError(ex, *e, kShape);
  }
  ServedModel* m = nullptr;
  if (auto e = FindModel(pr.model, &m)) return SendError(ex, *e, kShape);
  if (!m->chat_template) {
    return SendError(ex, BadRequest("messages", "the model has no chat template"), kShape);
  }
  auto r = m->RenderChat(pr.messages, pr.tools, pr.chat_template_kwargs);
  if (!r.ok()) return SendError(ex, BadRequest("messages", r.status().message()), kShape);
  SendJson(ex, Json{{"input_tokens", m->tokenizer.Encode(*r).size()}});
}

void Server::Impl::HandleDetokenize(HttpExchange& ex) {
  if (!ready.load()) return SendError(ex, FromStatus(Status(StatusCode::kUnavailable, "loading")));
  Json body;
  if (auto e = ReadBody(*this, ex.request(), &body)) return SendError(ex, *e);
  ServedModel* m = nullptr;
  if (auto e = FindModel(ModelField(body), &m)) return SendError(ex, *e);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) {
    return SendError(ex, BadRequest("tokens", "'tokens' must be an array of token ids"));
  }
  std::vector<int32_t> ids;
  for (const Json& x : *it) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
      return SendError(ex, BadRequest("tokens", "'tokens' must be an array of token ids"));
    }
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  if (Status st = m->tokenizer.CheckIds(ids); !st.ok()) {
    return SendError(ex, BadRequest("tokens", st.message()));
  }
  SendJson(ex, Json{{"prompt", m->tokenizer.Decode(ids)}});
}

void Server::Impl::HandleFlushCache(HttpExchange& ex) {
  if (!ready.load()) return SendError(ex, FromStatus(Status(StatusCode::kUnavailable, "loading")));
  for (const auto& m : models) m->engine->FlushCache();
  SendText(ex, "Cache flushed.\n");
}

void Server::Impl::HandleAbort(HttpExchange& ex) {
  Json body;
  if (auto e = ReadBody(*this, ex.request(), &body)) return SendError(ex, *e);
  bool all = false;
  if (auto it = body.find("abort_all"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return SendError(ex, BadRequest("abort_all", fmt::format("'abort_all' must be a boolean, "
                                                               "got {}",
                                                               it->type_name())));
    }
    all = it->get<bool>();
  }
  std::string rid;
  if (auto it = body.find("rid"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      return SendError(
          ex, BadRequest("rid", fmt::format("'rid' must be a string, got {}", it->type_name())));
    }
    rid = it->get<std::string>();
  }
  if (!all && rid.empty()) {
    return SendError(ex, BadRequest("rid", "give 'rid' or 'abort_all': true"));
  }
  int aborted = 0;
  MutexLock lock(jobs_mu);
  for (auto& [id, job] : jobs) {
    if (all || id == rid) {
      job->abort.store(true);
      for (RequestId r : job->ids) job->engine->Abort(r);
      ++aborted;
    }
  }
  SendJson(ex, Json{{"aborted", aborted}});
}

Status Server::Bind() {
  Impl& s = *impl_;
  HttpLimits limits = s.options.http;
  limits.max_handlers = std::max(4, limits.max_handlers);
  s.http = std::make_unique<HttpServer>(
      limits, [&s](HttpExchange& ex) { s.Handle(ex); }, TransportError,
      [&s](int status) { s.metrics.CountHttp(status); });
  if (Status st = s.http->Bind(s.options.host, s.options.port); !st.ok()) return st;
  s.bound_port = s.http->port();
  return Status::Ok();
}

void Server::Run() {
  impl_->run_called.store(true);
  impl_->http->Run();
  impl_->run_finished.store(true);
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.draining.exchange(true)) return;
  const auto deadline = Clock::now() + s.options.shutdown_timeout;
  s.drain_deadline_ns.store(deadline.time_since_epoch().count());
  if (s.http) s.http->StopAccepting();
}

}  // namespace mx::server
