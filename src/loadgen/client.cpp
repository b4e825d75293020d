#include "loadgen/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loadgen/sse.h"

namespace mx::loadgen {
namespace {

using Clock = std::chrono::steady_clock;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One in-flight request.
struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  SseParser parser;
  RequestRecord* rec = nullptr;
  Clock::time_point t0;  // benchmark start
  double start_s = 0;
  bool got_first = false;
  double last_content_s = 0;
  double last_line_s = 0;
  double last_byte_s = 0;  // idle_timeout_s counts from here
  long http_code = 0;
  std::string error_body;
  std::string abort_kind, abort_msg;
  bool saw_done = false;
  int content_chunks = 0;
  std::optional<int> prompt_tokens, completion_tokens, cached_tokens;
  std::string text;
  std::string first_text;
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  std::vector<int> call_index;  // the stream's index of each of `calls`

  ~Transfer() {
    if (headers != nullptr) curl_slist_free_all(headers);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
  double Now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

size_t OnData(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* tr = static_cast<Transfer*>(userdata);
  const size_t n = size * nmemb;
  tr->last_byte_s = tr->Now();
  if (tr->http_code == 0) curl_easy_getinfo(tr->easy, CURLINFO_RESPONSE_CODE, &tr->http_code);
  if (tr->http_code != 200) {
    if (tr->error_body.size() < 2048) tr->error_body.append(ptr, std::min<size_t>(n, 2048));
    return n;
  }
  const double t = tr->Now();
  for (const std::string& payload : tr->parser.Feed(std::string_view(ptr, n))) {
    tr->last_line_s = t;
    std::optional<StreamChunk> c = ParseStreamChunk(payload);
    if (!c) {
      tr->abort_kind = "malformed_sse";
      tr->abort_msg = "not JSON: " + payload.substr(0, 200);
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    if (!c->error.empty()) {
      tr->abort_kind = "server_error";
      tr->abort_msg = c->error;
      return 0;
    }
    // Responses' last event (response.completed) carries the usage.
    if (c->prompt_tokens) tr->prompt_tokens = c->prompt_tokens;
    if (c->completion_tokens) tr->completion_tokens = c->completion_tokens;
    if (c->cached_tokens) tr->cached_tokens = c->cached_tokens;
    if (c->done) {
      tr->saw_done = true;
      continue;
    }
    if (!c->text.empty()) {
      if (!tr->got_first) {
        tr->got_first = true;
        tr->rec->ttft_s = t - tr->start_s;
        tr->first_text = c->text;
      } else {
        tr->rec->itl_s.push_back(t - tr->last_content_s);
      }
      tr->last_content_s = t;
      tr->content_chunks++;
      tr->text += c->text;
      tr->reasoning += c->reasoning;
      tr->content.append(c->text, c->reasoning.size());
    }
    for (ToolCallPiece& p : c->tool_calls) {
      auto at = std::find(tr->call_index.begin(), tr->call_index.end(), p.index);
      if (at == tr->call_index.end()) {
        tr->call_index.push_back(p.index);
        tr->calls.emplace_back();
        at = tr->call_index.end() - 1;
      }
      ToolCall& call = tr->calls[static_cast<size_t>(at - tr->call_index.begin())];
      if (!p.id.empty()) call.id = p.id;
      if (call.name.empty()) call.name = p.name;
      call.arguments += p.arguments;
    }
  }
  return n;
}

std::string CurlErrorKind(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      return "connect";
    case CURLE_OPERATION_TIMEDOUT:
      return "timeout";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
      return "dropped";
    default:
      return "curl_" + std::to_string(static_cast<int>(code));
  }
}

void Finish(Transfer& tr, CURLcode code, const ClientOptions& o) {
  RequestRecord& r = *tr.rec;
  r.start_s = tr.start_s;
  r.latency_s = (tr.last_line_s > 0 ? tr.last_line_s : tr.Now()) - tr.start_s;
  if (tr.http_code == 0) curl_easy_getinfo(tr.easy, CURLINFO_RESPONSE_CODE, &tr.http_code);
  auto fail = [&](std::string kind, std::string msg) {
    r.success = false;
    r.error_kind = std::move(kind);
    r.error = std::move(msg);
    r.latency_s = tr.Now() - tr.start_s;
  };
  if (!tr.abort_kind.empty()) {
    fail(tr.abort_kind, tr.abort_msg);
  } else if (code != CURLE_OK) {
    fail(CurlErrorKind(code), curl_easy_strerror(code));
  } else if (tr.http_code != 200) {
    fail("http_" + std::to_string(tr.http_code), tr.error_body.substr(0, 500));
  } else if (!tr.saw_done) {
    fail("dropped", "stream ended before data: [DONE]");
  } else if (tr.content_chunks == 0 && tr.calls.empty()) {
    fail("no_output", "no chunk carried text");
  } else {
    r.success = true;
  }
  if (tr.completion_tokens) {
    r.output_len = *tr.completion_tokens;
    r.usage_reported = true;
  } else {
    r.output_len = tr.content_chunks;
  }
  if (tr.prompt_tokens) r.prompt_len = *tr.prompt_tokens;
  if (tr.cached_tokens) r.cached_tokens = *tr.cached_tokens;
  if (o.tokenizer != nullptr && r.success) {
    r.output_len_retokenized = static_cast<int>(o.tokenizer->Encode(tr.text).size());
  }
  if (o.keep_text) {
    r.generated_text = std::move(tr.text);
    r.first_chunk_text = std::move(tr.first_text);
    r.generated_reasoning = std::move(tr.reasoning);
    r.generated_content = std::move(tr.content);
    r.tool_calls = std::move(tr.calls);
  }
}

std::string JoinUrl(const std::string& base, const char* path) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return b + path;
}

}  // namespace

const char* EndpointPath(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kCompletions:
      return "/v1/completions";
    case Endpoint::kChat:
      return "/v1/chat/completions";
    case Endpoint::kMessages:
      return "/v1/messages";
    case Endpoint::kResponses:
      return "/v1/responses";
  }
  return "/v1/completions";
}

std::string RequestBody(const ClientOptions& o, const BenchPrompt& p) {
  nlohmann::json j;
  j["model"] = o.model;
  if (o.endpoint == Endpoint::kChat) {
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", p.text}}});
    j["max_completion_tokens"] = p.output_len;
  } else if (o.send_ids || p.text.empty()) {
    j["prompt"] = p.ids;
  } else {
    j["prompt"] = p.text;
  }
  j["max_tokens"] = p.output_len;
  j["temperature"] = 0.0;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) j["ignore_eos"] = true;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

RunOutput RunRequests(const ClientOptions& o, const std::vector<const BenchPrompt*>& prompts,
                      const std::vector<double>& arrivals) {
  GlobalInit();
  RunOutput out;
  const size_t n = prompts.size();
  out.records.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out.records[i].arrival_s = arrivals[i];
    out.records[i].prompt_len = prompts[i]->prompt_len;
    out.records[i].expected_output_len = o.ignore_eos ? prompts[i]->output_len : 0;
  }
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 8192L);
  const std::string url = JoinUrl(o.base_url, EndpointPath(o.endpoint));
  const Clock::time_point t0 = Clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::unordered_set<Transfer*> live;  // added to `multi`, not finished
  size_t next = 0, done = 0;
  int in_flight = 0, failed = 0;
  double last_progress = -1;
  while (done < n) {
    const double t = now_s();
    while (next < n && arrivals[next] <= t &&
           (o.max_concurrency <= 0 || in_flight < o.max_concurrency)) {
      auto* tr = new Transfer;
      tr->t0 = t0;
      tr->rec = &out.records[next];
      tr->body = prompts[next]->body.empty() ? RequestBody(o, *prompts[next]) : prompts[next]->body;
      tr->easy = curl_easy_init();
      tr->headers = curl_slist_append(tr->headers, "Content-Type: application/json");
      tr->headers = curl_slist_append(tr->headers, "Expect:");
      tr->headers = curl_slist_append(tr->headers, "Accept: text/event-stream");
      if (!o.api_key.empty()) {
        tr->headers =
            curl_slist_append(tr->headers, ("Authorization: Bearer " + o.api_key).c_str());
        tr->headers = curl_slist_append(tr->headers, ("x-api-key: " + o.api_key).c_str());
      }
      if (o.endpoint == Endpoint::kMessages) {
        tr->headers = curl_slist_append(tr->headers, "anthropic-version: 2023-06-01");
      }
      CURL* e = tr->easy;
      curl_easy_setopt(e, CURLOPT_URL, url.c_str());
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, tr->body.c_str());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(tr->body.size()));
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, tr->headers);
      curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnData);
      curl_easy_setopt(e, CURLOPT_WRITEDATA, tr);
      curl_easy_setopt(e, CURLOPT_PRIVATE, tr);
      curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
      if (o.request_timeout_s > 0) {
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(o.request_timeout_s * 1e3));
      }
      if (o.connect_timeout_s > 0) {
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(o.connect_timeout_s * 1e3));
      }
      tr->start_s = now_s();
      tr->last_byte_s = tr->start_s;
      live.insert(tr);
      curl_multi_add_handle(multi, e);
      ++next;
      ++in_flight;
    }
    int running = 0;
    curl_multi_perform(multi, &running);
    int msgs = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &msgs)) {
      if (m->msg != CURLMSG_DONE) continue;
      Transfer* tr = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&tr));
      const CURLcode code = m->data.result;
      curl_multi_remove_handle(multi, m->easy_handle);
      Finish(*tr, code, o);
      failed += tr->rec->success ? 0 : 1;
      live.erase(tr);
      delete tr;
      --in_flight;
      ++done;
    }
    // A server that goes silent (no byte, not even an SSE comment) ends the request, never
    // the run. Checked here rather than with curl's low-speed limit, whose moving average
    // lets a burst before the silence hide it for seconds.
    if (o.idle_timeout_s > 0) {
      const double t_idle = now_s();
      std::vector<Transfer*> stalled;
      for (Transfer* tr : live) {
        if (t_idle - tr->last_byte_s > o.idle_timeout_s) stalled.push_back(tr);
      }
      for (Transfer* tr : stalled) {
        tr->abort_kind = "timeout";
        tr->abort_msg =
            fmt::format("no byte from the server for {:.0f} s (--idle-timeout)", o.idle_timeout_s);
        curl_multi_remove_handle(multi, tr->easy);
        Finish(*tr, CURLE_OK, o);
        ++failed;
        live.erase(tr);
        delete tr;
        --in_flight;
        ++done;
      }
    }
    const double t2 = now_s();
    if (o.progress && t2 - last_progress >= 0.25) {
      last_progress = t2;
      o.progress(static_cast<int>(next), static_cast<int>(done), failed, in_flight, t2);
    }
    if (done >= n) break;
    double wait = 0.05;
    if (next < n && (o.max_concurrency <= 0 || in_flight < o.max_concurrency)) {
      wait = std::min(wait, std::max(0.0, arrivals[next] - t2));
    }
    const int wait_ms = static_cast<int>(std::ceil(wait * 1e3));
    if (wait_ms > 0) curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
  }
  out.duration_s = now_s();
  if (o.progress) {
    o.progress(static_cast<int>(next), static_cast<int>(done), failed, in_flight, out.duration_s);
  }
  curl_multi_cleanup(multi);
  return out;
}

}  // namespace mx::loadgen
