// A scripted OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models)
// with deterministic timings, for the load generator's tests and for trying `mxserve bench`
// without a model (`mxserve bench mock-server`). It models a server with `slots` request
// slots (others queue, so TTFT grows under overload), a fixed TTFT plus a per-uncached-token
// prefill cost, a fixed inter-token latency, and a prefix cache at `cache_block` granularity
// that reports usage.prompt_tokens_details.cached_tokens. `fault` scripts failures by the
// order in which requests arrive.
//
// Thread-safety: Start/Stop from one thread; the server runs on its own threads.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace mx::loadgen {

struct MockServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = a free port
  double ttft_ms = 20;
  double prefill_us_per_uncached_token = 0;
  double itl_ms = 10;
  int tokens_per_chunk = 1;
  int slots = 0;         // requests served at once; 0 = unlimited
  int cache_block = 16;  // prefix-cache granularity in tokens; 0 = no cache and no cached_tokens
  int threads = 256;     // connection threads (concurrent streams the server can hold)
  // Fault for the k-th request (0-based, arrival order): "" (none), "http_500", "http_429",
  // "malformed" (a non-JSON data line), "drop" (connection closed mid-stream), "no_done"
  // (stream ends cleanly without [DONE]), "error_event" (an {"error":...} chunk),
  // "stall_after_final" (the last chunk, then silence on an open connection for 5 s).
  std::function<std::string(int)> fault;
  const tok::Tokenizer* tokenizer = nullptr;  // counts text prompts; else whitespace words
  // Scripted replies: when set, the completion text for a request body (streamed as one
  // chunk, or none when empty) replaces the max_tokens filler words; usage counts it as one
  // token per whitespace-separated word. Called from the server's threads.
  std::function<std::string(const std::string& request_body)> reply;
};

class MockServer {
 public:
  static Result<std::unique_ptr<MockServer>> Start(const MockServerOptions& options);
  ~MockServer();
  MockServer(const MockServer&) = delete;
  MockServer& operator=(const MockServer&) = delete;

  int port() const;
  std::string base_url() const;
  int requests_seen() const;
  // Blocks until Stop() is called from another thread (used by the CLI).
  void Wait();
  void Stop();

 private:
  MockServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mx::loadgen
