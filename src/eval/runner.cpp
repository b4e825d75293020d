#include "eval/runner.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

namespace mx::eval {
namespace {

using Clock = std::chrono::steady_clock;

// One progress line: a live line on a terminal, else a line every 10 s and at the end.
class Progress {
 public:
  Progress(const ServerOptions& o, int total)
      : enabled_(o.progress), tty_(isatty(STDERR_FILENO) != 0), label_(o.label), total_(total) {}

  void Report(int done, int failed, int retries, bool final) {
    if (!enabled_) return;
    const double t = std::chrono::duration<double>(Clock::now() - t0_).count();
    if (!final && !tty_ && t - last_ < 10) return;
    last_ = t;
    std::string eta = "--";
    if (done > 0 && done < total_) {
      eta = FormatSeconds(t / done * (total_ - done));
    } else if (done >= total_) {
      eta = "0 s";
    }
    std::fprintf(stderr, "%s[%s] %d/%d done, %d failed, %d retries, %s elapsed, ETA %s%s",
                 tty_ ? "\r\033[K" : "", label_.c_str(), done, total_, failed, retries,
                 FormatSeconds(t).c_str(), eta.c_str(), tty_ && !final ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  static std::string FormatSeconds(double s) {
    char buf[32];
    if (s < 120) {
      std::snprintf(buf, sizeof buf, "%.0f s", s);
    } else {
      std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60,
                    static_cast<int>(s) % 60);
    }
    return buf;
  }

  bool enabled_, tty_;
  std::string label_;
  int total_;
  Clock::time_point t0_ = Clock::now();
  double last_ = -1e9;
};

}  // namespace

bool IsRetryable(const std::string& kind) {
  if (kind.rfind("http_", 0) == 0) {
    const int code = std::atoi(kind.c_str() + 5);
    return code >= 500 || code == 408 || code == 429;
  }
  return kind == "connect" || kind == "timeout" || kind == "dropped" || kind == "malformed_sse" ||
         kind == "server_error" || kind.rfind("curl_", 0) == 0;
}

std::vector<Response> SendAll(const ServerOptions& o, const std::vector<std::string>& bodies) {
  const int n = static_cast<int>(bodies.size());
  std::vector<Response> out(n);
  std::vector<loadgen::BenchPrompt> prompts(n);
  for (int i = 0; i < n; ++i) prompts[i].body = bodies[i];

  loadgen::ClientOptions c;
  c.base_url = o.base_url;
  c.model = o.model;
  c.endpoint = o.endpoint;
  c.ignore_eos = false;
  c.max_concurrency = o.concurrency;
  c.request_timeout_s = o.request_timeout_s;
  c.api_key = o.api_key;
  c.keep_text = true;

  Progress progress(o, n);
  int finished = 0, failed = 0, retries = 0;
  std::vector<int> pending(n);
  for (int i = 0; i < n; ++i) pending[i] = i;
  for (int attempt = 1; !pending.empty(); ++attempt) {
    if (attempt > 1) {
      const double wait = o.retry_backoff_s * std::pow(2.0, attempt - 2);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    std::vector<const loadgen::BenchPrompt*> batch;
    for (int i : pending) batch.push_back(&prompts[i]);
    const int finished_before = finished;
    c.progress = [&](int, int done, int, int, double) {
      progress.Report(finished_before + done, failed, retries, false);
    };
    loadgen::RunOutput run = loadgen::RunRequests(c, batch, std::vector<double>(batch.size(), 0));
    std::vector<int> again;
    for (size_t k = 0; k < pending.size(); ++k) {
      const int i = pending[k];
      loadgen::RequestRecord& rec = run.records[k];
      Response& r = out[i];
      r.attempts = attempt;
      r.latency_s = rec.latency_s;
      r.prompt_tokens = rec.usage_reported ? rec.prompt_len : -1;
      r.completion_tokens = rec.usage_reported ? rec.output_len : -1;
      if (rec.success || rec.error_kind == "no_output") {
        r.ok = true;
        r.text = std::move(rec.generated_text);
        r.reasoning = std::move(rec.generated_reasoning);
        r.content = std::move(rec.generated_content);
        r.tool_calls = std::move(rec.tool_calls);
        r.error_kind.clear();
        r.error.clear();
        ++finished;
      } else if (IsRetryable(rec.error_kind) && attempt <= o.max_retries) {
        r.error_kind = rec.error_kind;
        r.error = rec.error;
        again.push_back(i);
        ++retries;
      } else {
        r.error_kind = rec.error_kind;
        r.error = rec.error;
        ++finished;
        ++failed;
      }
    }
    pending = std::move(again);
    progress.Report(finished, failed, retries, pending.empty());
  }
  return out;
}

}  // namespace mx::eval
