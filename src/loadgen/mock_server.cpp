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
std::string Event(const std::string& name, const json& j) {
  return "event: " + name + "\ndata: " + j.dump() + "\n\n";
}

enum class Api { kCompletions, kChat, kMessages, kResponses };

// One tool call in the route's stream shape; `index` is its block/output index (after the
// thinking and text blocks).
template <typename ChunkFn>
std::string ToolCallEvents(Api api, const MockToolCall& c, int index, const ChunkFn& chunk) {
  if (api == Api::kMessages) {
    return Event("content_block_start", {{"type", "content_block_start"},
                                         {"index", index},
                                         {"content_block",
                                          {{"type", "tool_use"},
                                           {"id", c.id},
                                           {"name", c.name},
                                           {"input", json::object()}}}}) +
           Event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", index},
                  {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}}) +
           Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  }
  if (api == Api::kResponses) {
    return Event("response.output_item.added", {{"type", "response.output_item.added"},
                                                {"output_index", index},
                                                {"item",
                                                 {{"type", "function_call"},
                                                  {"call_id", c.id},
                                                  {"name", c.name},
                                                  {"arguments", ""}}}}) +
           Event("response.function_call_arguments.delta",
                 {{"type", "response.function_call_arguments.delta"},
                  {"output_index", index},
                  {"delta", c.arguments}});
  }
  json ch = chunk("", false);
  ch["choices"][0]["delta"] = {
      {"tool_calls",
       json::array({{{"index", index - 2},
                     {"id", c.id},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}}})}};
  return Sse(ch);
}

// Appends the text of a string or of an array of content parts/blocks ("text", "thinking",
// tool results' "content") to `pieces`, one piece per part.
void AddContent(const json& c, std::vector<std::string>& pieces) {
  if (c.is_string()) {
    pieces.push_back(c.get<std::string>());
    return;
  }
  if (!c.is_array()) return;
  for (const json& part : c) {
    if (part.is_string()) {
      pieces.push_back(part.get<std::string>());
      continue;
    }
    if (!part.is_object()) continue;
    for (const char* k : {"thinking", "text"}) {
      if (part.contains(k) && part[k].is_string()) pieces.push_back(part[k].get<std::string>());
    }
    for (const char* k : {"content", "output"}) {
      if (part.contains(k)) AddContent(part[k], pieces);
    }
  }
}

// The prompt's text pieces in order (see the header).
std::vector<std::string> PromptPieces(const json& req, Api api) {
  std::vector<std::string> pieces;
  if (api == Api::kMessages && req.contains("system")) AddContent(req["system"], pieces);
  if (api == Api::kResponses && req.contains("instructions")) {
    AddContent(req["instructions"], pieces);
  }
  const char* list = api == Api::kResponses ? "input" : "messages";
  if (!req.contains(list)) return pieces;
  const json& items = req[list];
  if (items.is_string()) {
    pieces.push_back(items.get<std::string>());
    return pieces;
  }
  if (!items.is_array()) return pieces;
  for (const json& m : items) {
    if (!m.is_object()) continue;
    if (m.contains("reasoning_content")) AddContent(m["reasoning_content"], pieces);
    for (const char* k : {"content", "output"}) {
      if (m.contains(k)) AddContent(m[k], pieces);
    }
  }
  return pieces;
}

}  // namespace

struct MockServer::Impl {
  MockServerOptions o;
  httplib::Server svr;
  std::thread thread;
  int port = 0;
  std::atomic<int> seen{0};
  std::unique_ptr<Slots> slots;
  std::unique_ptr<PrefixCache> cache;

  void AppendIds(const std::string& text, std::vector<int64_t>& ids) const {
    if (o.tokenizer != nullptr) {
      for (int32_t id : o.tokenizer->Encode(text, false)) ids.push_back(id);
      return;
    }
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && text[i] == ' ') ++i;
      size_t j = i;
      while (j < text.size() && text[j] != ' ') ++j;
      if (j > i) {
        ids.push_back(static_cast<int64_t>(std::hash<std::string>{}(text.substr(i, j - i))));
      }
      i = j;
    }
  }

  std::vector<int64_t> PromptIds(const json& req, Api api) const {
    std::vector<int64_t> ids;
    if (api == Api::kCompletions) {
      if (!req.contains("prompt")) return ids;
      const json& p = req["prompt"];
      if (p.is_array()) {
        for (const json& x : p) ids.push_back(x.is_number_integer() ? x.get<int64_t>() : -1);
      } else if (p.is_string()) {
        AppendIds(p.get<std::string>(), ids);
      }
      return ids;
    }
    for (const std::string& piece : PromptPieces(req, api)) AppendIds(piece, ids);
    return ids;
  }

  void Handle(const httplib::Request& hreq, httplib::Response& res, Api api) {
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
    const bool stream = req.value("stream", false);
    const bool typed = api == Api::kMessages || api == Api::kResponses;
    if (typed && !stream) {
      res.status = 400;
      res.set_content(R"({"error":{"message":"mock: this route streams only, send stream: true"}})",
                      "application/json");
      return;
    }
    int max_tokens = 16;
    for (const char* k : {"max_completion_tokens", "max_tokens", "max_output_tokens"}) {
      if (req.contains(k) && req[k].is_number_integer()) {
        max_tokens = req[k].get<int>();
        break;
      }
    }
    const bool chat = api == Api::kChat;
    const bool usage =
        typed || (req.contains("stream_options") && req["stream_options"].is_object() &&
                  req["stream_options"].value("include_usage", false));
    const std::vector<int64_t> ids = PromptIds(req, api);
    const int prompt_tokens = static_cast<int>(ids.size());
    slots->Acquire();
    const Clock::time_point t_admit = Clock::now();
    const int cached = cache->MatchAndInsert(ids);
    const double ttft_s =
        o.ttft_ms * 1e-3 + (prompt_tokens - cached) * o.prefill_us_per_uncached_token * 1e-6;
    const std::string model = req.value("model", std::string("mock"));

    // What is generated: reasoning words first, then the answer's tokens.
    int reasoning = api == Api::kCompletions ? 0 : std::max(0, o.reasoning_words);
    std::optional<std::string> scripted;
    std::vector<MockToolCall> calls;
    if (o.script) {
      MockReply r = o.script(hreq.body);
      scripted = std::move(r.text);
      calls = std::move(r.tool_calls);
    } else if (o.reply) {
      scripted = o.reply(hreq.body);
    }
    if (scripted) {
      std::istringstream words(*scripted);
      max_tokens = reasoning + static_cast<int>(calls.size()) +
                   static_cast<int>(std::distance(std::istream_iterator<std::string>(words),
                                                  std::istream_iterator<std::string>()));
    } else {
      reasoning = std::min(reasoning, max_tokens);
    }
    json usage_obj = {{"prompt_tokens", prompt_tokens},
                      {"completion_tokens", max_tokens},
                      {"total_tokens", prompt_tokens + max_tokens}};
    if (o.cache_block > 0) usage_obj["prompt_tokens_details"] = {{"cached_tokens", cached}};
    if (api == Api::kMessages) {
      usage_obj = {{"input_tokens", prompt_tokens - cached},
                   {"cache_creation_input_tokens", 0},
                   {"cache_read_input_tokens", cached},
                   {"output_tokens", max_tokens}};
    } else if (api == Api::kResponses) {
      usage_obj = {{"input_tokens", prompt_tokens},
                   {"input_tokens_details", {{"cached_tokens", cached}}},
                   {"output_tokens", max_tokens},
                   {"total_tokens", prompt_tokens + max_tokens}};
    }

    auto chunk = [chat, model](const std::string& text, bool is_reasoning) {
      json c = {{"id", "cmpl-mock"}, {"model", model}, {"created", 0}};
      if (chat) {
        c["object"] = "chat.completion.chunk";
        c["choices"] = json::array(
            {{{"index", 0}, {"delta", {{is_reasoning ? "reasoning_content" : "content", text}}}}});
      } else {
        c["object"] = "text_completion";
        c["choices"] = json::array({{{"index", 0}, {"text", text}}});
      }
      return c;
    };
    // One delta of generated text in the route's stream shape.
    auto delta = [api, chunk](const std::string& text, bool is_reasoning) {
      if (api == Api::kMessages) {
        return Event("content_block_delta",
                     {{"type", "content_block_delta"},
                      {"index", is_reasoning ? 0 : 1},
                      {"delta", is_reasoning ? json{{"type", "thinking_delta"}, {"thinking", text}}
                                             : json{{"type", "text_delta"}, {"text", text}}}});
      }
      if (api == Api::kResponses) {
        const std::string type =
            is_reasoning ? "response.reasoning_text.delta" : "response.output_text.delta";
        return Event(type, {{"type", type}, {"delta", text}});
      }
      return Sse(chunk(text, is_reasoning));
    };
    if (!stream) {
      std::this_thread::sleep_until(
          t_admit + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                        ttft_s + (max_tokens - 1) * o.itl_ms * 1e-3)));
      slots->Release();
      std::string text = scripted.value_or("");
      for (int i = 0; !scripted && i < max_tokens; ++i) text += " a";
      json r = chunk(text, false);
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
    res.set_chunked_content_provider(
        "text/event-stream", [=, this](size_t, httplib::DataSink& sink) {
          (void)guard;
          auto at = [&](double s) {
            std::this_thread::sleep_until(t_admit + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(s)));
          };
          auto put = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          if (api == Api::kMessages) {
            json msg = {{"id", "msg_mock"}, {"type", "message"},        {"role", "assistant"},
                        {"model", model},   {"content", json::array()}, {"usage", usage_obj}};
            msg["usage"]["output_tokens"] = 0;
            if (!put(Event("message_start", {{"type", "message_start"}, {"message", msg}}))) {
              return false;
            }
          } else if (api == Api::kResponses) {
            if (!put(Event("response.created",
                           {{"type", "response.created"},
                            {"response", {{"id", "resp_mock"}, {"status", "in_progress"}}}}))) {
              return false;
            }
          }
          std::vector<int64_t> generated = ids;  // enters the cache once the stream ends
          std::string reasoning_text, answer_text;
          // Reasoning tokens one per chunk, then (unscripted) answer tokens per_chunk at a time.
          const int answer_tokens = scripted ? 0 : max_tokens - reasoning;
          int r_sent = 0, a_sent = 0, k = 0;
          bool finished = true;
          while (r_sent < reasoning || a_sent < answer_tokens) {
            at(ttft_s + k * itl_s);
            if (fault == "malformed" && k == 1) put("data: {\"choices\": [ not json\n\n");
            if (fault == "drop" && k == 1) return false;  // connection closed mid-stream
            if (fault == "error_event" && k == 1) {
              put(Sse({{"error", {{"message", "scripted error event"}}}}));
              finished = false;
              break;
            }
            const bool in_reasoning = r_sent < reasoning;
            const int n = in_reasoning ? 1 : std::min(per_chunk, answer_tokens - a_sent);
            std::string text;
            for (int i = 0; i < n; ++i) text += in_reasoning ? " r" : " a";
            (in_reasoning ? reasoning_text : answer_text) += text;
            if (!put(delta(text, in_reasoning))) return false;
            (in_reasoning ? r_sent : a_sent) += n;
            k += 1;
          }
          if (scripted && finished) {
            at(ttft_s + k * itl_s);
            answer_text = *scripted;
            if (!scripted->empty() && !put(delta(*scripted, false))) return false;
            for (size_t i = 0; i < calls.size(); ++i) {
              if (!put(ToolCallEvents(api, calls[i], static_cast<int>(i) + 2, chunk))) return false;
            }
          }
          if (usage && finished) {
            if (api == Api::kMessages) {
              put(Event("message_delta", {{"type", "message_delta"},
                                          {"delta", {{"stop_reason", "max_tokens"}}},
                                          {"usage", usage_obj}}));
            } else if (api != Api::kResponses) {
              json u = chunk("", false);
              u["choices"] = json::array();
              u["usage"] = usage_obj;
              put(Sse(u));
            }
          }
          AppendIds(reasoning_text, generated);
          AppendIds(answer_text, generated);
          cache->MatchAndInsert(generated);
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
            if (api == Api::kMessages) {
              put(Event("message_stop", {{"type", "message_stop"}}));
            } else if (api == Api::kResponses) {
              put(Event("response.completed",
                        {{"type", "response.completed"},
                         {"response",
                          {{"id", "resp_mock"}, {"status", "completed"}, {"usage", usage_obj}}}}));
            } else {
              put("data: [DONE]\n\n");
            }
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
    mp->Handle(q, r, Api::kCompletions);
  });
  m.svr.Post("/v1/chat/completions", [mp](const httplib::Request& q, httplib::Response& r) {
    mp->Handle(q, r, Api::kChat);
  });
  m.svr.Post("/v1/messages", [mp](const httplib::Request& q, httplib::Response& r) {
    mp->Handle(q, r, Api::kMessages);
  });
  m.svr.Post("/v1/responses", [mp](const httplib::Request& q, httplib::Response& r) {
    mp->Handle(q, r, Api::kResponses);
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
