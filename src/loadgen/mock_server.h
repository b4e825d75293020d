// A scripted OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models,
// and streaming /v1/messages in Anthropic's shape and /v1/responses in OpenAI's) with
// deterministic timings, for the load generator's tests and for trying `mxserve bench`
// without a model (`mxserve bench mock-server`). It models a server with `slots` request
// slots (others queue, so TTFT grows under overload), a fixed TTFT plus a per-uncached-token
// prefill cost, a fixed inter-token latency, and a prefix cache at `cache_block` granularity
// that reports usage.prompt_tokens_details.cached_tokens (Messages: cache_read_input_tokens;
// Responses: input_tokens_details.cached_tokens). `fault` scripts failures by the order in
// which requests arrive.
//
// Token accounting: a prompt is the sequence of its text pieces in order (chat: each message's
// reasoning_content then content; Messages: system, then each block's text, thinking or
// tool_result content; Responses: instructions, then each item's text), each piece split on
// spaces into one token per word (or encoded by `tokenizer`). A finished request also enters
// its prompt followed by its reasoning words and its answer words into the prefix cache, as a
// radix cache does, so a conversation that sends a reply back verbatim hits its whole previous
// turn (in whole blocks).
//
// Thread-safety: Start/Stop from one thread; the server runs on its own threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace mx::loadgen {

// A scripted turn with tool calls (MockServerOptions::script).
struct MockToolCall {
  std::string id, name, arguments;  // arguments: JSON text, streamed as it is
};
struct MockReply {
  std::string text;
  std::vector<MockToolCall> tool_calls;
};

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
  // Words of reasoning (" r" each) streamed before the answer as reasoning_content (chat),
  // thinking (Messages) or reasoning_text (Responses); they are the first of the max_tokens
  // (with `reply`: extra tokens before it). Completions ignore it.
  int reasoning_words = 0;
  // Scripted turns with tool calls (wins over `reply`): the text streams as `reply`'s does,
  // then each call in the route's shape (chat: delta.tool_calls; Messages: a tool_use block
  // with input_json_delta; Responses: a function_call item with its arguments delta). Usage
  // counts the text's words plus one token per call.
  std::function<MockReply(const std::string& request_body)> script;
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
