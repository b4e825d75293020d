// The HTTP server: OpenAI-compatible routes (/v1/chat/completions, /v1/completions,
// /v1/responses, /v1/models), Anthropic's /v1/messages, sglang-native routes (/generate, /health,
// /health_generate, /flush_cache, /abort_request, /get_server_info), vLLM-style /tokenize and
// /detokenize, Prometheus /metrics, and a web page at / (webui.h), over one or more ServedModels.
// The transport is HttpServer (http_server.h: one event loop for every socket, limits and
// deadlines); each complete request runs on a handler thread of its own, where its engine stream is
// read, detokenized and written as SSE, or as one JSON object once the result exists. A client that
// goes away is noticed within disconnect_poll, written to or not, and its engine requests are
// aborted.
//
// Lifecycle: Bind -> (Run on a thread) -> AddModel... -> SetReady -> Shutdown. Until
// SetReady, /health answers 503 and generation routes 503.
//
// Thread-safety: Shutdown may be called from any thread (e.g. a signal-waiting thread);
// AddModel and SetReady from the thread that owns the Server, before SetReady.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"
#include "grammar/constraint.h"
#include "server/http_server.h"
#include "server/request_parse.h"
#include "server/response_store.h"
#include "server/served_model.h"

namespace mx::server {

// Thinking budgets (tokens; 0: unbounded) for the reasoning efforts a request may name
// (Responses' reasoning.effort, chat's reasoning_effort); none and minimal turn thinking off.
struct EffortBudgets {
  int32_t low = 1024;
  int32_t medium = 8192;
  int32_t high = 0;  // and xhigh
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 30000;           // 0: any free port (see Server::port)
  std::string api_key;        // non-empty: every route but /health needs "Bearer KEY" or x-api-key
  std::string default_model;  // "": the first model added
  HttpLimits http;            // transport limits and deadlines (http_server.h)
  std::chrono::milliseconds shutdown_timeout{30000};
  std::chrono::milliseconds disconnect_poll{20};  // client-gone check while waiting on the engine
  RequestLimits limits;
  grammar::GrammarCacheOptions grammars;  // structured-output limits, for every model
  ResponseStoreLimits responses_store;    // /v1/responses kept for previous_response_id
  // Rendered for templates that take `clear_thinking` when a request does not say
  // (--clear-thinking): false keeps earlier turns' reasoning, so prompts are append-only.
  bool clear_thinking = false;
  EffortBudgets effort_budgets;
  // tool_choice auto: once the model writes <tool_call>, the rest of that call is constrained to
  // the declared tools' grammar (--no-tool-call-constraint turns it off).
  bool tool_call_constraint = true;
  // A streaming response waiting for its first token (a long prefill) or its next one gets a
  // keep-alive this often: an SSE comment (chat, completions), Anthropic's `ping` event, a
  // Responses `response.in_progress` event (--sse-keepalive-interval).
  std::chrono::milliseconds sse_keepalive{4000};
  bool webui = true;  // the status + playground page at / (webui.h); --no-webui turns it off
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port; errors name the address.
  Status Bind();
  int port() const;
  // Serves until Shutdown has drained; returns then. REQUIRES: Bind succeeded.
  void Run();

  // REQUIRES: before SetReady. The first model added is the default unless
  // options.default_model names another.
  void AddModel(std::unique_ptr<ServedModel> model);
  // Fails when default_model names no added model.
  Status SetReady();

  // Stops accepting connections, answers 503 to new requests on open connections, lets
  // running requests finish up to shutdown_timeout and then aborts them. Returns at once; Run
  // returns when the last request has ended. Idempotent.
  void Shutdown();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mx::server
