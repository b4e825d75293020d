// Sends the harness's requests to a server through the load generator's streaming client,
// with bounded concurrency, retries and a progress line with ETA on stderr.
//
// A request that fails with a retryable error (refused or dropped connection, timeout, HTTP
// 5xx, 408 or 429, a malformed stream or an error event) is sent again after
// retry_backoff_s · 2^(attempt−1) seconds, up to max_retries times; then it is reported with
// its error (and scored as wrong by the caller). Other HTTP 4xx errors (a request the server
// rejects, e.g. a prompt beyond its context) are not retried. A stream that completes without
// any text is an empty answer, not an error.
#pragma once

#include <string>
#include <vector>

#include "loadgen/client.h"

namespace mx::eval {

struct ServerOptions {
  std::string base_url = "http://127.0.0.1:30000";
  std::string model = "default";
  std::string api_key;
  loadgen::Endpoint endpoint = loadgen::Endpoint::kChat;
  int concurrency = 8;
  double request_timeout_s = 600;
  int max_retries = 3;
  double retry_backoff_s = 1.0;
  std::string label = "eval";  // progress line prefix
  bool progress = true;        // print progress on stderr
};

struct Response {
  bool ok = false;
  std::string text;                           // reasoning + answer as streamed
  std::string reasoning, content;             // text split in two
  std::vector<loadgen::ToolCall> tool_calls;  // streamed tool calls
  std::string error_kind, error;              // of the last attempt, when !ok
  int attempts = 0;
  int prompt_tokens = -1;      // usage.prompt_tokens, -1 when not reported
  int completion_tokens = -1;  // usage.completion_tokens, -1 when not reported
  double latency_s = 0;        // of the last attempt
};

// True for the error kinds that a retry may cure (see above).
bool IsRetryable(const std::string& error_kind);

// Sends every body (a complete streaming request body) and returns the responses in order.
std::vector<Response> SendAll(const ServerOptions& options, const std::vector<std::string>& bodies);

}  // namespace mx::eval
