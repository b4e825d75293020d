#include "loadgen/mock_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace mx::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

class Slots {
 public:
  explicit Slots(int n) : free_(n) {}
  void Acquire() {
    if (free_ < 0) return;
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return free_ > 0; });
    --free_;
  }
  void Release() {
    if (free_ < 0) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;  // < 0: unlimited
};

// Longest cached prefix at block granularity; lookup and insert are one atomic step so the
// first request of a group always misses and every later one hits, whatever the interleaving.
class PrefixCache {
 public:
  explicit PrefixCache(int block) : block_(block) {}
  int MatchAndInsert(const std::vector<int64_t>& ids) {
    if (block_ <= 0) return 0;
    std::lock_guard<std::mutex> l(mu_);
    uint64_t h = 1469598103934665603ull;
    int cached = 0;
    bool matching = true;
    const size_t blocks = ids.size() / static_cast<size_t>(block_);
    for (size_t b = 0; b < blocks; ++b) {
      for (size_t i = b * block_; i < (b + 1) * block_; ++i) {
        h = (h ^ static_cast<uint64_t>(ids[i])) * 1099511628211ull;
      }
      if (matching && seen_.count(h)) {
        cached += block_;
      } else {
        matching = false;
        seen_.insert(h);
      }
    }
    return cached;
  }

 private:
  int block_;
  std::mutex mu_;
  std::unordered_set<uint64_t> seen_;
};

std::string Sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

}  // namespace

struct MockServer::Impl {
  MockServerOptions o;
  httplib::Server svr;
  std::thread thread;
  int port = 0;
  std::atomic<int> seen{0};
  std::unique_ptr<Slots> slots;
  std::unique_ptr<PrefixCache> cache;

  std::vector<int64_t> PromptIds(const json& req, bool chat) {
    std::string text;
    if (chat) {
      if (req.contains("messages") && req["messages"].is_array()) {
        for (const json& m : req["messages"]) {
          if (m.is_object() && m.contains("content") && m["content"].is_string()) {
            text += m["content"].get<std::string>();
          }
        }
      }
    } else if (req.contains("prompt")) {
      const json& p = req["prompt"];
      if (p.is_array()) {
        std::vector<int64_t> ids;
        for (const json& x : p) ids.push_back(x.is_number_integer() ? x.get<int64_t>() : -1);
        return ids;
      }
      if (p.is_string()) text = p.get<std::string>();
    }
    std::vector<int64_t> ids;
    if (o.tokenizer != nullptr) {
      for (int32_t id : o.tokenizer->Encode(text, false)) ids.push_back(id);
    } else {
      size_t i = 0;
      while (i < text.size()) {
        while (i < text.size() && text[i] == ' ') ++i;
        size_t j = i;
        while (j < text.size() && text[j] != ' ') ++j;
        if (j > i)
          ids.push_back(static_cast<int64_t>(std::hash<std::string>{}(text.substr(i, j - i))));
        i = j;
      }
    }
    return ids;
  }

  void Handle(const httplib::Request& hreq, httplib::Response& res, bool chat) {
    const int index = seen.fetch_add(1);
    const std::string fault = o.fault ? o.fault(index) : std::string();
    json req = json::parse(hreq.body, nullptr, false);
    if (req.is_discarded() || !req.is_object()) {
      res.status = 400;
      res.set_content(R"({"error":{"message":"body is not a JSON object"}})", "application/json");
      return;
    }
    if (fault == "http_500" || fault == "http_429") {
      res.status = fault == "http_500" ? 500 : 429;
      res.set_content(R"({"error":{"message":"scripted failure"}})", "application/json");
      return;
    }
    int max_tokens = 16;
    for (const char* k : {"max_completion_tokens", "max_tokens"}) {
      if (req.contains(k) && req[k].is_number_integer()) {
        max_tokens = req[k].get<int>();
        break;
      }
    }
    const bool stream = req.value("stream", false);
    const bool usage = req.contains("stream_options") && req["stream_options"].is_object() &&
                       req["stream_options"].value("include_usage", false);
    const std::vector<int64_t> ids = PromptIds(req, chat);
    const int prompt_tokens = static_cast<int>(ids.size());
    slots->Acquire();
    const Clock::time_point t_admit = Clock::now();
    const int cached = cache->MatchAndInsert(ids);
    const double ttft_s =
        o.ttft_ms * 1e-3 + (prompt_tokens - cached) * o.prefill_us_per_uncached_token * 1e-6;
    const std::string model = req.value("model", std::string("mock"));

    std::optional<std::string> scripted;
    if (o.reply) {
      scripted = o.reply(hreq.body);
      std::istringstream words(*scripted);
      max_tokens = static_cast<int>(std::distance(std::istream_iterator<std::string>(words),
                                                  std::istream_iterator<std::string>()));
    }
    json usage_obj = {{"prompt_tokens", prompt_tokens},
                      {"completion_tokens", max_tokens},
                      {"total_tokens", prompt_tokens + max_tokens}};
    if (o.cache_block > 0) usage_obj["prompt_tokens_details"] = {{"cached_tokens", cached}};

    auto chunk = [chat, model](const std::string& text) {
      json c = {{"id", "cmpl-mock"}, {"model", model}, {"created", 0}};
      if (chat) {
        c["object"] = "chat.completion.chunk";
        c["choices"] = json::array({{{"index", 0}, {"delta", {{"content", text}}}}});
      } else {
        c["object"] = "text_completion";
        c["choices"] = json::array({{{"index", 0}, {"text", text}}});
      }
      return c;
    };
    if (!stream) {
      std::this_thread::sleep_until(
          t_admit + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                        ttft_s + (max_tokens - 1) * o.itl_ms * 1e-3)));
      slots->Release();
      std::string text = scripted.value_or("");
      for (int i = 0; !scripted && i < max_tokens; ++i) text += " a";
      json r = chunk(text);
      r["usage"] = usage_obj;
      res.set_content(r.dump(), "application/json");
      return;
    }
    // The slot is freed when the provider (and so this guard) is destroyed, even if the
    // client went away.
    auto guard = std::shared_ptr<void>(nullptr, [s = slots.get()](void*) { s->Release(); });
    const double itl_s = o.itl_ms * 1e-3;
    const int per_chunk = std::max(1, o.tokens_per_chunk);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [=](size_t, httplib::DataSink& sink) {
      (void)guard;
      auto at = [&](double s) {
        std::this_thread::sleep_until(t_admit + std::chrono::duration_cast<Clock::duration>(
                                                    std::chrono::duration<double>(s)));
      };
      int sent = 0, k = 0;
      if (scripted) {
        at(ttft_s);
        if (!scripted->empty()) {
          std::string s = Sse(chunk(*scripted));
          if (!sink.write(s.data(), s.size())) return false;
        }
        sent = max_tokens;
      }
      while (sent < max_tokens) {
        at(ttft_s + k * itl_s);
        if (fault == "malformed" && k == 1) {
          std::string bad = "data: {\"choices\": [ not json\n\n";
          sink.write(bad.data(), bad.size());
        }
        if (fault == "drop" && k == 1) return false;  // connection closed mid-stream
        if (fault == "error_event" && k == 1) {
          std::string e = Sse({{"error", {{"message", "scripted error event"}}}});
          sink.write(e.data(), e.size());
          break;
        }
        const int n = std::min(per_chunk, max_tokens - sent);
        std::string text;
        for (int i = 0; i < n; ++i) text += " a";
        std::string s = Sse(chunk(text));
        if (!sink.write(s.data(), s.size())) return false;
        sent += n;
        k += 1;
      }
      if (usage && sent >= max_tokens) {
        json u = chunk("");
        u["choices"] = json::array();
        u["usage"] = usage_obj;
        std::string s = Sse(u);
        sink.write(s.data(), s.size());
      }
      if (fault == "stall_after_final") {
        // ik_llama.cpp's shape when the only token is held back: the final chunk, then
        // neither [DONE] nor the end of the chunked body, the connection left open.
        const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
        while (sink.is_writable() && Clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
      }
      if (fault != "no_done") {
        std::string d = "data: [DONE]\n\n";
        sink.write(d.data(), d.size());
      }
      sink.done();
      return true;
    });
  }
};

MockServer::MockServer() : impl_(std::make_unique<Impl>()) {}

MockServer::~MockServer() { Stop(); }

Result<std::unique_ptr<MockServer>> MockServer::Start(const MockServerOptions& options) {
  std::unique_ptr<MockServer> s(new MockServer());
  Impl& m = *s->impl_;
  m.o = options;
  m.slots = std::make_unique<Slots>(options.slots > 0 ? options.slots : -1);
  m.cache = std::make_unique<PrefixCache>(options.cache_block);
  const int threads = std::max(options.threads, 4);
  m.svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  m.svr.set_keep_alive_max_count(1000);
  m.svr.set_tcp_nodelay(true);
  m.svr.set_read_timeout(60, 0);
  m.svr.set_write_timeout(60, 0);
  // note: Debian's libcpp-httplib listens with a backlog of 5, which drops SYNs when a
  // thousand clients connect at once; the socket hook remembers the fd to listen again wider.
  std::atomic<int> listen_fd{-1};
  m.svr.set_socket_options([&listen_fd](socket_t fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = fd;
  });
  Impl* mp = &m;
  m.svr.Post("/v1/completions", [mp](const httplib::Request& q, httplib::Response& r) {
    mp->Handle(q, r, /*chat=*/false);
  });
  m.svr.Post("/v1/chat/completions", [mp](const httplib::Request& q, httplib::Response& r) {
    mp->Handle(q, r, /*chat=*/true);
  });
  m.svr.Get("/v1/models", [](const httplib::Request&, httplib::Response& r) {
    r.set_content(R"({"object":"list","data":[{"id":"mock","object":"model"}]})",
                  "application/json");
  });
  m.svr.Get("/health", [](const httplib::Request&, httplib::Response& r) {
    r.set_content("ok", "text/plain");
  });
  if (options.port > 0) {
    if (!m.svr.bind_to_port(options.host, options.port)) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("mock server: cannot bind {}:{}", options.host, options.port));
    }
    m.port = options.port;
  } else {
    m.port = m.svr.bind_to_any_port(options.host);
    if (m.port <= 0) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("mock server: cannot bind a port on {}", options.host));
    }
  }
  if (listen_fd >= 0) ::listen(listen_fd, 4096);
  m.svr.set_socket_options([](socket_t fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  m.thread = std::thread([mp] { mp->svr.listen_after_bind(); });
  // Stop() before the loop runs would be lost (httplib's stop() ignores a server that is not
  // running yet), so return only once it is.
  while (!m.svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

int MockServer::port() const { return impl_->port; }
std::string MockServer::base_url() const {
  return fmt::format("http://{}:{}", impl_->o.host, impl_->port);
}
int MockServer::requests_seen() const { return impl_->seen.load(); }

void MockServer::Wait() {
  if (impl_->thread.joinable()) impl_->thread.join();
}

void MockServer::Stop() {
  if (!impl_) return;
  impl_->svr.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace mx::loadgen
