// HttpServer: accept, per-connection state machine (idle -> head -> body -> handler -> next),
// limits and deadlines, response writing from handler threads, drain. Every socket operation
// runs on the one thread that runs the io_context (Run); handler threads reach a connection
// only by posting to it.
#include "server/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/check.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/strings.h"

namespace mx::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

// note: a namespace of this file's own (not an anonymous one): the unity build puts the
// module's files into one translation unit.
namespace http_server_internal {

// A stream's writes wait while this much is queued for a client that reads slowly.
constexpr size_t kMaxQueuedBytes = size_t{4} << 20;
// Bytes read ahead (pipelined requests) while a request is handled; past it the socket is no
// longer watched, and a vanished client is noticed on the next write instead.
constexpr size_t kMaxReadAhead = size_t{64} << 10;
// After a response that closes the connection, what the client still sends is read and
// dropped for up to this long (so that it receives the response rather than a reset).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = size_t{1} << 20;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

struct HttpRefusal {
  int status;
  std::string message;
  std::string code;
};

// The answer to a parse error of Beast's (not a timeout or the client going away).
HttpRefusal RefusalFor(beast::error_code ec, const HttpLimits& l) {
  if (ec == bhttp::error::header_limit) {
    return {431,
            fmt::format("the request head is larger than {} bytes (--max-header-bytes)",
                        l.max_header_bytes),
            "request_header_too_large"};
  }
  if (ec == bhttp::error::body_limit) {
    return {413,
            fmt::format("the request body is larger than {} bytes (--max-request-bytes)",
                        l.max_body_bytes),
            "request_too_large"};
  }
  if (ec == bhttp::error::bad_content_length || ec == bhttp::error::multiple_content_length) {
    return {400, "invalid or conflicting Content-Length", "bad_content_length"};
  }
  return {400, "malformed HTTP request: " + ec.message(), "bad_request"};
}

// What a complete head is refused for, if anything (field count, Content-Encoding).
template <typename Header>
std::optional<HttpRefusal> CheckHead(const Header& msg, const HttpLimits& l) {
  if (std::distance(msg.begin(), msg.end()) > l.max_headers) {
    return HttpRefusal{431,
                       fmt::format("more than {} header fields (--max-headers)", l.max_headers),
                       "request_header_too_large"};
  }
  const std::string_view encoding = Trim(msg[bhttp::field::content_encoding]);
  if (!encoding.empty() && !IEquals(encoding, "identity")) {
    return HttpRefusal{415,
                       fmt::format("Content-Encoding '{}' is not accepted; send the body "
                                   "uncompressed",
                                   encoding),
                       "unsupported_content_encoding"};
  }
  return std::nullopt;
}

void ConfigureParser(bhttp::request_parser<bhttp::string_body>& p, const HttpLimits& l) {
  p.header_limit(static_cast<uint32_t>(
      std::min<size_t>(l.max_header_bytes, std::numeric_limits<uint32_t>::max())));
  p.body_limit(l.max_body_bytes);
}

HttpRequest ToRequest(bhttp::request<bhttp::string_body>&& msg) {
  HttpRequest r;
  r.method = std::string(msg.method_string());
  r.target = std::string(msg.target());
  r.path = r.target.substr(0, r.target.find('?'));
  r.version = msg.version() == 10 ? 10 : 11;
  for (const auto& f : msg) r.headers.emplace_back(f.name_string(), f.value());
  r.body = std::move(msg.body());
  return r;
}

}  // namespace http_server_internal

using namespace http_server_internal;

HttpParseResult ParseHttpRequest(std::string_view data, const HttpLimits& limits) {
  HttpParseResult out;
  bhttp::request_parser<bhttp::string_body> parser;
  ConfigureParser(parser, limits);
  parser.eager(false);
  beast::error_code ec;
  net::const_buffer buf(data.data(), data.size());
  bool checked_head = false;
  while (buf.size() > 0 && !parser.is_done()) {
    const size_t n = parser.put(buf, ec);
    if (ec == bhttp::error::need_more) {
      ec = {};
      break;
    }
    if (ec) break;
    buf += n;
    if (parser.is_header_done() && !checked_head) {
      checked_head = true;
      if (auto r = CheckHead(parser.get(), limits)) {
        out.status = r->status;
        out.message = r->message;
        return out;
      }
      parser.eager(true);
    }
    if (n == 0) break;
  }
  if (ec) {
    const HttpRefusal r = RefusalFor(ec, limits);
    out.status = r.status;
    out.message = r.message;
    return out;
  }
  if (!parser.is_done()) {
    out.status = -1;
    out.message = "incomplete";
    return out;
  }
  out.request = ToRequest(parser.release());
  out.consumed = data.size() - buf.size();
  return out;
}

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return "";
}

bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  volatile unsigned char diff = given.size() != expected.size() ? 1 : 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(HttpLimits l, Handler h, ErrorBody e, std::function<void(int)> r)
      : limits(l), handler(std::move(h)), error_body(std::move(e)), on_response(std::move(r)) {}

  HttpLimits limits;
  Handler handler;
  ErrorBody error_body;
  std::function<void(int)> on_response;

  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  int port = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<int> handlers{0};  // requests in a handler now

  // io thread only.
  std::list<HttpSession*> sessions;  // in accept order (the oldest is evicted first)
  std::map<std::string, int> per_client;
  bool draining = false;

  // Handler threads alive (Run waits for them: they touch this object until their end).
  Mutex threads_mu;
  CondVar threads_cv;
  int live_threads GUARDED_BY(threads_mu) = 0;

  void Accept();
  void OnAccept(tcp::socket socket);
  bool MakeRoom(const std::string& addr);
  void Refuse(tcp::socket& socket, int status, const std::string& message);
  void Remove(HttpSession* s);
  void MaybeFinish();
  std::string ErrorResponse(int status, const std::string& message, const std::string& code,
                            const std::string& path);
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::shared_ptr<HttpServer::Impl> srv, tcp::socket socket, std::string addr, int port)
      : srv_(std::move(srv)),
        stream_(std::move(socket)),
        deadline_(stream_.get_executor()),
        addr_(std::move(addr)),
        port_(port) {}

  const std::string& addr() const { return addr_; }
  std::list<HttpSession*>::iterator pos;
  HttpServer::Impl& server() { return *srv_; }

  // io thread.
  void Start() {
    beast::error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);
    // note: a client waiting for a long non-streaming answer sends nothing; TCP keep-alive
    // keeps middleboxes from dropping the connection meanwhile.
    stream_.socket().set_option(net::socket_base::keep_alive(true), ec);
    NextRequest();
  }
  bool evictable() const { return phase_ == kIdle || phase_ == kHead || phase_ == kLinger; }
  void CloseIfIdle() {
    if (phase_ == kIdle || phase_ == kHead || phase_ == kLinger) Close();
  }
  void Close() {
    if (phase_ == kClosed) return;
    phase_ = kClosed;
    Disarm();
    MarkGone();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    srv_->Remove(this);
  }

  // Any thread: queue response bytes; `last` ends the response (then the connection closes
  // if `close`, else reads the next request).
  void PostWrite(std::string data, bool last, bool close) {
    {
      MutexLock lock(mu_);
      queued_ += data.size();
    }
    net::post(srv_->ioc, [self = shared_from_this(), data = std::move(data), last,
                          close]() mutable { self->Enqueue(std::move(data), last, close); });
  }
  // Blocks while too much is queued; false once the client is gone.
  bool WaitWritable() {
    MutexLock lock(mu_);
    while (!gone_.load() && queued_ >= kMaxQueuedBytes) cv_.Wait(lock);
    return !gone_.load();
  }
  bool gone() const { return gone_.load(); }

 private:
  enum Phase { kIdle, kHead, kBody, kBusy, kLinger, kClosed };

  // The deadline of the current read (idle, head, body, linger): when it passes, the read is
  // cancelled with timed_out_ set, so that a 408 can still be written (the stream's own
  // timeouts would close the socket).
  void Arm(std::chrono::milliseconds d) {
    timed_out_ = false;
    const uint64_t gen = ++deadline_gen_;
    deadline_.expires_after(d);
    deadline_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->deadline_gen_) return;
      self->timed_out_ = true;
      beast::error_code e;
      self->stream_.socket().cancel(e);
    });
  }
  void Disarm() {
    ++deadline_gen_;
    deadline_.cancel();
  }

  void MarkGone() {
    MutexLock lock(mu_);
    gone_.store(true);
    cv_.NotifyAll();
  }

  void NextRequest() {
    if (srv_->draining) return Close();
    if (buf_.size() > 0) return ReadHead();
    phase_ = kIdle;
    Arm(srv_->limits.idle_timeout);
    stream_.expires_never();
    stream_.async_read_some(buf_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->Disarm();
                              if (ec || self->phase_ != kIdle) return self->Close();
                              self->buf_.commit(n);
                              self->ReadHead();
                            });
  }

  void ReadHead() {
    phase_ = kHead;
    parser_.emplace();
    ConfigureParser(*parser_, srv_->limits);
    Arm(srv_->limits.head_timeout);
    stream_.expires_never();
    bhttp::async_read_header(stream_, buf_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->Disarm();
                               self->OnHead(ec);
                             });
  }

  // A read error: the client went away (close quietly) or sent something refused (answer).
  void OnReadError(beast::error_code ec, bool head) {
    const HttpLimits& l = srv_->limits;
    if (timed_out_ && ec == net::error::operation_aborted) {
      return Reject(408,
                    head ? fmt::format("the request head did not arrive within {} ms "
                                       "(--http-head-timeout)",
                                       l.head_timeout.count())
                         : fmt::format("the request body did not arrive within {} ms "
                                       "(--http-body-timeout)",
                                       l.body_timeout.count()),
                    "request_timeout");
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted || ec == net::error::broken_pipe) {
      return Close();
    }
    const HttpRefusal r = RefusalFor(ec, l);
    Reject(r.status, r.message, r.code);
  }

  void OnHead(beast::error_code ec) {
    if (phase_ != kHead) return;
    if (ec) return OnReadError(ec, /*head=*/true);
    const auto& msg = parser_->get();
    const HttpLimits& l = srv_->limits;
    if (auto r = CheckHead(msg, l)) return Reject(r->status, r->message, r->code);
    if (parser_->is_done()) return Dispatch();
    if (IEquals(Trim(msg[bhttp::field::expect]), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      phase_ = kBody;
      stream_.expires_after(l.write_timeout);
      return net::async_write(stream_, net::buffer(kContinue),
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec || self->phase_ != kBody) return self->Close();
                                self->ReadBody();
                              });
    }
    ReadBody();
  }

  void ReadBody() {
    phase_ = kBody;
    Arm(srv_->limits.body_timeout);
    stream_.expires_never();
    bhttp::async_read(stream_, buf_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->Disarm();
                        if (self->phase_ != kBody) return;
                        if (ec) return self->OnReadError(ec, /*head=*/false);
                        self->Dispatch();
                      });
  }

  // Answers a request refused before its handler, then closes.
  void Reject(int status, const std::string& message, const std::string& code) {
    phase_ = kBusy;
    rejected_ = true;
    StopWatching();
    srv_->on_response(status);
    // The route picks the error's shape; the request line may be all that was parsed.
    std::string path;
    if (parser_) {
      const auto target = parser_->get().target();
      path = std::string(target.substr(0, target.find('?')));
    }
    Enqueue(srv_->ErrorResponse(status, message, code, path), /*last=*/true, /*close=*/true);
  }

  void Dispatch() {
    phase_ = kBusy;
    auto msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();
    HttpRequest r = ToRequest(std::move(msg));
    r.remote_addr = addr_;
    r.remote_port = port_;
    if (srv_->handlers.load() >= srv_->limits.max_handlers) {
      return Reject(503,
                    fmt::format("{} requests are being handled (--http-threads); retry later",
                                srv_->limits.max_handlers),
                    "server_busy");
    }
    srv_->handlers.fetch_add(1);
    {
      MutexLock lock(srv_->threads_mu);
      ++srv_->live_threads;
    }
    auto run = [self = shared_from_this(), r = std::move(r), keep_alive = keep_alive_]() mutable {
      std::shared_ptr<HttpServer::Impl> srv = self->srv_;
      {
        HttpExchange ex(std::move(self), std::move(r), keep_alive);
        try {
          srv->handler(ex);
        } catch (const std::exception& e) {
          MX_LOG_ERROR("request handler threw: {}", e.what());
        }
      }  // an exchange that sent nothing answers 500 here
      srv->handlers.fetch_sub(1);
      // note: a raw pointer: once Run has returned this may never run, and a queued
      // shared_ptr would keep the Impl (and its io_context) alive in a cycle.
      HttpServer::Impl* raw = srv.get();
      net::post(srv->ioc, [raw] { raw->MaybeFinish(); });
      MutexLock lock(srv->threads_mu);
      --srv->live_threads;
      srv->threads_cv.NotifyAll();
    };
    try {
      std::thread(std::move(run)).detach();
    } catch (const std::system_error& e) {
      // No thread to be had (a resource limit): refuse this request, keep serving.
      srv_->handlers.fetch_sub(1);
      {
        MutexLock lock(srv_->threads_mu);
        --srv_->live_threads;
      }
      MX_LOG_WARN("cannot start a request thread: {}", e.what());
      return Reject(503, "the server cannot take another request now; retry later", "server_busy");
    }
    StartWatching();
  }

  // While a handler runs: wait for the socket to turn readable. End-of-file or a reset is a
  // client gone; bytes are the next (pipelined) request, kept in buf_.
  void StartWatching() {
    watching_ = true;
    const uint64_t gen = ++watch_gen_;
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this(), gen](beast::error_code ec) {
          if (gen != self->watch_gen_ || !self->watching_ || self->phase_ != kBusy) return;
          self->watching_ = false;
          if (ec) return;
          auto space = self->buf_.prepare(4096);
          const ssize_t n = ::recv(self->stream_.socket().native_handle(), space.data(),
                                   space.size(), MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            MX_LOG_DEBUG("client {}:{} went away during its request", self->addr_, self->port_);
            return self->Close();
          }
          if (n > 0) self->buf_.commit(static_cast<size_t>(n));
          if (self->buf_.size() < kMaxReadAhead) self->StartWatching();
        });
  }
  void StopWatching() {
    if (!watching_) return;
    watching_ = false;
    ++watch_gen_;
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  void Enqueue(std::string data, bool last, bool close) {
    if (phase_ == kClosed) {
      MutexLock lock(mu_);
      queued_ -= data.size();
      cv_.NotifyAll();
      return;
    }
    if (!data.empty()) out_.push_back(std::move(data));
    if (last) {
      response_done_ = true;
      close_after_ = close_after_ || close;
    }
    Flush();
  }

  void Flush() {
    if (writing_ || phase_ == kClosed) return;
    if (out_.empty()) {
      if (response_done_) {
        response_done_ = false;
        AfterResponse();
      }
      return;
    }
    writing_ = true;
    cur_.clear();
    for (std::string& s : out_) cur_ += s;
    out_.clear();
    stream_.expires_after(srv_->limits.write_timeout);
    net::async_write(stream_, net::buffer(cur_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       {
                         MutexLock lock(self->mu_);
                         self->queued_ -= self->cur_.size();
                         self->cv_.NotifyAll();
                       }
                       if (ec) return self->Close();
                       self->Flush();
                     });
  }

  void AfterResponse() {
    StopWatching();
    // note: only a refused request may have left bytes unread, which a close would answer with
    // a reset that can destroy the response in flight; the others close at once.
    if (close_after_ || srv_->draining) return rejected_ ? Linger() : Close();
    NextRequest();
  }

  // Half-closes, then reads and drops what the client still sends until it closes.
  void Linger() {
    phase_ = kLinger;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    Arm(std::chrono::duration_cast<std::chrono::milliseconds>(kLingerTime));
    LingerRead();
  }
  void LingerRead() {
    stream_.expires_never();
    stream_.async_read_some(net::buffer(drop_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->dropped_ += n;
                              if (ec || self->dropped_ > kLingerBytes) return self->Close();
                              self->LingerRead();
                            });
  }

  std::shared_ptr<HttpServer::Impl> srv_;  // before stream_: outlives the socket
  beast::tcp_stream stream_;
  net::steady_timer deadline_;
  uint64_t deadline_gen_ = 0;
  bool timed_out_ = false;
  std::string addr_;
  int port_;
  beast::flat_buffer buf_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Phase phase_ = kIdle;
  bool keep_alive_ = true;
  bool watching_ = false;
  uint64_t watch_gen_ = 0;
  std::deque<std::string> out_;
  std::string cur_;
  bool writing_ = false;
  bool response_done_ = false;
  bool close_after_ = false;
  bool rejected_ = false;
  char drop_[4096];
  size_t dropped_ = 0;

  Mutex mu_;
  CondVar cv_;
  size_t queued_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> gone_{false};
};

// ---- HttpServer::Impl ----

std::string HttpServer::Impl::ErrorResponse(int status, const std::string& message,
                                            const std::string& code, const std::string& path) {
  auto [body, type] = error_body(status, message, code, path);
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      status, Reason(status), type, body.size(), body);
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (draining || !acceptor.is_open()) return;
    if (ec) {
      // EMFILE and the like: wait a little rather than spin.
      MX_LOG_WARN("accept: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e && !draining) Accept();
      });
      return;
    }
    OnAccept(std::move(socket));
    Accept();
  });
}

void HttpServer::Impl::Refuse(tcp::socket& socket, int status, const std::string& message) {
  on_response(status);
  const std::string r = ErrorResponse(status, message, "too_many_connections", "");
  beast::error_code ec;
  socket.non_blocking(true, ec);
  socket.write_some(net::buffer(r), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

bool HttpServer::Impl::MakeRoom(const std::string& addr) {
  auto evict = [&](bool same_client) {
    for (HttpSession* s : sessions) {
      if (s->evictable() && (!same_client || s->addr() == addr)) {
        s->Close();
        return true;
      }
    }
    return false;
  };
  auto it = per_client.find(addr);
  if (it != per_client.end() && it->second >= limits.max_connections_per_client && !evict(true)) {
    return false;
  }
  if (static_cast<int>(sessions.size()) >= limits.max_connections && !evict(false)) return false;
  return true;
}

void HttpServer::Impl::OnAccept(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;
  std::string addr = peer.address().to_string();
  if (!MakeRoom(addr)) {
    return Refuse(socket, 503,
                  fmt::format("too many connections (--max-connections {}, "
                              "--max-connections-per-client {}); every one is busy",
                              limits.max_connections, limits.max_connections_per_client));
  }
  // note: the session holds the Impl by shared_ptr; the Impl's list holds raw pointers that
  // Close() removes.
  auto s = std::make_shared<HttpSession>(shared_from_this(), std::move(socket), addr, peer.port());
  ++per_client[addr];
  sessions.push_back(s.get());
  s->pos = std::prev(sessions.end());
  s->Start();
}

void HttpServer::Impl::Remove(HttpSession* s) {
  sessions.erase(s->pos);
  auto it = per_client.find(s->addr());
  if (it != per_client.end() && --it->second <= 0) per_client.erase(it);
  MaybeFinish();
}

void HttpServer::Impl::MaybeFinish() {
  if (draining && sessions.empty() && handlers.load() == 0 && guard) {
    accept_retry.cancel();
    guard.reset();
  }
}

// ---- HttpExchange ----

HttpExchange::HttpExchange(std::shared_ptr<HttpSession> session, HttpRequest request,
                           bool keep_alive)
    : session_(std::move(session)), request_(std::move(request)), keep_alive_(keep_alive) {}

HttpExchange::~HttpExchange() {
  if (state_ == kNothing) {
    auto [body, type] =
        session_->server().error_body(500, "the handler sent no response", "", request_.path);
    Send(500, type, std::move(body));
  } else if (state_ == kStreaming) {
    // The handler gave up on its stream (client gone): end the connection, not the stream.
    session_->PostWrite("", /*last=*/true, /*close=*/true);
  }
}

void HttpExchange::Send(int status, std::string_view content_type, std::string body,
                        const HttpHeaders& extra) {
  MX_CHECK(state_ == kNothing);
  state_ = kDone;
  session_->server().on_response(status);
  const bool close = !keep_alive_;
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", status, Reason(status));
  for (const auto& [k, v] : extra) head += fmt::format("{}: {}\r\n", k, v);
  head += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
                      content_type, body.size(), close ? "close" : "keep-alive");
  session_->PostWrite(head + body, /*last=*/true, close);
}

bool HttpExchange::BeginStream(int status, std::string_view content_type,
                               const HttpHeaders& extra) {
  MX_CHECK(state_ == kNothing);
  state_ = kStreaming;
  session_->server().on_response(status);
  // HTTP/1.0 has no chunked encoding: the body ends where the connection does.
  const bool chunked = request_.version >= 11;
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", status, Reason(status));
  for (const auto& [k, v] : extra) head += fmt::format("{}: {}\r\n", k, v);
  head += fmt::format("Content-Type: {}\r\n", content_type);
  head += chunked ? fmt::format("Transfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
                                keep_alive_ ? "keep-alive" : "close")
                  : std::string("Connection: close\r\n\r\n");
  session_->PostWrite(std::move(head), /*last=*/false, /*close=*/false);
  return !session_->gone();
}

bool HttpExchange::Write(std::string_view data) {
  MX_CHECK(state_ == kStreaming);
  if (!session_->WaitWritable()) return false;
  if (data.empty()) return true;
  if (request_.version >= 11) {
    session_->PostWrite(fmt::format("{:x}\r\n{}\r\n", data.size(), data), false, false);
  } else {
    session_->PostWrite(std::string(data), false, false);
  }
  return !session_->gone();
}

void HttpExchange::End() {
  MX_CHECK(state_ == kStreaming);
  state_ = kDone;
  const bool chunked = request_.version >= 11;
  session_->PostWrite(chunked ? "0\r\n\r\n" : "", /*last=*/true,
                      /*close=*/!chunked || !keep_alive_);
}

bool HttpExchange::ClientGone() const { return session_->gone(); }

// ---- HttpServer ----

HttpServer::HttpServer(HttpLimits limits, Handler handler, ErrorBody error_body,
                       std::function<void(int)> on_response)
    : impl_(std::make_shared<Impl>(limits, std::move(handler), std::move(error_body),
                                   std::move(on_response))) {}

HttpServer::~HttpServer() = default;

int HttpServer::port() const { return impl_->port; }

Status HttpServer::Bind(const std::string& host, int port) {
  Impl& s = *impl_;
  beast::error_code ec;
  tcp::resolver resolver(s.ioc);
  auto results = resolver.resolve(host, std::to_string(port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return IoError("cannot bind {}:{} (cannot resolve the host: {})", host, port, ec.message());
  }
  const tcp::endpoint ep = results.begin()->endpoint();
  s.acceptor.open(ep.protocol(), ec);
  // SO_REUSEADDR only: with SO_REUSEPORT a second server on a busy port would bind without an
  // error and the kernel would split the connections between them.
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(4096, ec);
  if (ec) {
    return IoError("cannot bind {}:{} (in use, or not a local address?): {}", host, port,
                   ec.message());
  }
  s.port = s.acceptor.local_endpoint(ec).port();
  // Every connection is a descriptor: raise the soft limit to the hard one.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return Status::Ok();
}

void HttpServer::Run() {
  Impl& s = *impl_;
  s.guard.emplace(net::make_work_guard(s.ioc));
  net::post(s.ioc, [&s] {
    if (!s.draining) s.Accept();
  });
  s.ioc.run();
  MutexLock lock(s.threads_mu);
  while (s.live_threads != 0) s.threads_cv.Wait(lock);
}

void HttpServer::StopAccepting() {
  if (impl_->stop_requested.exchange(true)) return;
  Impl* s = impl_.get();
  net::post(s->ioc, [s] {
    s->draining = true;
    beast::error_code ec;
    s->acceptor.close(ec);
    s->accept_retry.cancel();
    for (auto it = s->sessions.begin(); it != s->sessions.end();) {
      HttpSession* x = *it++;  // Close() erases x from the list
      x->CloseIfIdle();
    }
    s->MaybeFinish();
  });
}

}  // namespace mx::server
