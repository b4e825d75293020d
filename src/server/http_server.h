// The HTTP/1.1 transport under the server's routes, built for hostile networks on Boost.Beast
// (parser) over Boost.Asio (one event-loop thread for every socket). A connection costs no
// thread while it sends a request head or body or sits idle between requests: only a complete
// request gets a handler thread, so slow or idle clients cannot starve the others. Limits,
// each answered before the next byte is read: head size and header count (431), a deadline for
// the whole head and one for the whole body (408), body size (413, also for chunked bodies),
// Content-Encoding other than identity (415), invalid or conflicting Content-Length (400),
// connections in total and per client address (the oldest idle one is closed to make room,
// else 503), an idle keep-alive timeout. Pipelined requests are answered in order. While a
// handler runs, the socket is watched: a client that closes or resets it is seen at once
// (HttpExchange::ClientGone), whether or not anything has been written.
//
// Thread-safety: Bind and Run from the owning thread; StopAccepting from any thread; an
// HttpExchange from its handler thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace mx::server {

struct HttpLimits {
  size_t max_header_bytes = size_t{16} << 10;      // request line + headers; beyond: 431
  int max_headers = 100;                           // header fields; beyond: 431
  size_t max_body_bytes = size_t{32} << 20;        // after chunked decoding; beyond: 413
  std::chrono::milliseconds head_timeout{10000};   // the whole head, from its first byte: 408
  std::chrono::milliseconds body_timeout{60000};   // the whole body, from the end of the head
  std::chrono::milliseconds idle_timeout{5000};    // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{30000};  // one write to a client that stopped reading
  int max_connections = 16384;            // open at once; beyond: oldest idle closed, else 503
  int max_connections_per_client = 4096;  // per client address, likewise
  int max_handlers = 1024;                // requests being handled at once; beyond: 503
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // target up to '?'
  int version = 11;    // 10 or 11
  HttpHeaders headers;
  std::string body;
  std::string remote_addr;
  int remote_port = 0;

  // The first field named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

class HttpSession;

// One request being handled: its response goes out through Send (whole) or BeginStream /
// Write / End (HTTP/1.1: chunked; HTTP/1.0: raw bytes, then the connection closes).
// Destroying an exchange that sent nothing answers 500. Used by one thread at a time.
class HttpExchange {
 public:
  HttpExchange(std::shared_ptr<HttpSession> session, HttpRequest request, bool keep_alive);
  ~HttpExchange();
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  const HttpRequest& request() const { return request_; }
  // REQUIRES: nothing sent yet.
  void Send(int status, std::string_view content_type, std::string body,
            const HttpHeaders& extra = {});
  // REQUIRES: nothing sent yet. False when the client is already gone.
  bool BeginStream(int status, std::string_view content_type, const HttpHeaders& extra = {});
  // Queues bytes of a stream; blocks while more than a few MB wait for a slow reader. False
  // once the client is gone (closed, reset, or stopped reading past the write timeout).
  bool Write(std::string_view data);
  void End();
  // True once the client closed or reset the connection; noticed without writing.
  bool ClientGone() const;
  bool sent() const { return state_ != kNothing; }

 private:
  enum State { kNothing, kStreaming, kDone };
  std::shared_ptr<HttpSession> session_;
  HttpRequest request_;
  bool keep_alive_;
  State state_ = kNothing;
};

class HttpServer {
 public:
  using Handler = std::function<void(HttpExchange&)>;
  // Answers a request refused before any handler (limits, malformed): status, message and the
  // request's path ("" when its head was not read); returns the body and its content type.
  using ErrorBody = std::function<std::pair<std::string, std::string>(
      int status, const std::string& message, const std::string& code, const std::string& path)>;

  HttpServer(HttpLimits limits, Handler handler, ErrorBody error_body,
             std::function<void(int status)> on_response);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0: any free port); errors name the address.
  Status Bind(const std::string& host, int port);
  int port() const;
  // Serves until StopAccepting has been called and every connection and handler has ended.
  void Run();
  // Closes the listening socket and every idle connection; requests in progress finish (their
  // connections close after the response). Idempotent; any thread.
  void StopAccepting();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// One request's bytes through the parser, limits and head checks that a connection applies
// (deadlines aside): for tests and the fuzz target.
struct HttpParseResult {
  int status = 0;       // 0: parsed; -1: incomplete; else the refusal's status (400/413/415/431)
  std::string message;  // the refusal's reason
  HttpRequest request;  // when parsed
  size_t consumed = 0;  // bytes of `data` the request took (what follows is pipelined)
};
HttpParseResult ParseHttpRequest(std::string_view data, const HttpLimits& limits);

// Compares in time that depends only on expected's length (API keys).
bool ConstantTimeEquals(std::string_view given, std::string_view expected);

}  // namespace mx::server
