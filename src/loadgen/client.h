// The streaming HTTP client: libcurl's multi interface driven by the calling thread alone, so
// one thread keeps thousands of SSE streams open. Requests are dispatched on an absolute
// schedule (open loop; an optional --max-concurrency cap delays dispatch, which is then
// outside TTFT as in vLLM's client_queue_time) and every chunk is time-stamped on arrival.
// Failures of any kind (refused connection, HTTP error, malformed SSE, a stream cut before
// [DONE], an error event) end up in the request's RequestRecord, never as a crash.
//
// Thread-safety: RunRequests may be called from several threads; each call owns its handles.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "loadgen/metrics.h"
#include "loadgen/prompts.h"
#include "tokenizer/tokenizer.h"

namespace mx::loadgen {

// kMessages (Anthropic's /v1/messages) and kResponses (OpenAI's /v1/responses) take only
// prompts with a preset `body` (bench sessions and eval tools build them).
enum class Endpoint { kCompletions, kChat, kMessages, kResponses };

// The path a request to `endpoint` is POSTed to ("/v1/chat/completions", ...).
const char* EndpointPath(Endpoint endpoint);

struct ClientOptions {
  std::string base_url = "http://127.0.0.1:30000";
  std::string model = "default";
  Endpoint endpoint = Endpoint::kCompletions;
  bool send_ids = true;  // completions: "prompt": [ids] (exact); false sends the text
  bool ignore_eos = true;
  int max_concurrency = 0;       // 0 = uncapped (open loop)
  double request_timeout_s = 0;  // 0 = none
  // A request whose server sends no byte for this long fails ("timeout") instead of holding
  // the run: some servers keep a stream open after its last chunk (seen: ik_llama.cpp when
  // the only generated token is held back as an incomplete UTF-8 sequence). 0 = none.
  double idle_timeout_s = 120;
  double connect_timeout_s = 30;  // 0 = curl's default
  std::string api_key;            // sent as "Authorization: Bearer ..." (and x-api-key) when set
  bool keep_text = false;         // keep generated_text (and reasoning, content) in the records
  const tok::Tokenizer* tokenizer = nullptr;  // counts output_len_retokenized when set
  // Called about every 250 ms and once at the end from the driving thread.
  std::function<void(int sent, int done, int failed, int in_flight, double elapsed_s)> progress;
};

struct RunOutput {
  std::vector<RequestRecord> records;  // in prompt order
  double duration_s = 0;               // first dispatch opportunity -> last completion
};

// Sends prompts[i] at arrivals[i] seconds (relative to the call) and waits for all of them.
// REQUIRES: prompts.size() == arrivals.size(); arrivals non-decreasing.
RunOutput RunRequests(const ClientOptions& options, const std::vector<const BenchPrompt*>& prompts,
                      const std::vector<double>& arrivals);

// The JSON body of one streaming request (exposed for tests).
std::string RequestBody(const ClientOptions& options, const BenchPrompt& prompt);

}  // namespace mx::loadgen
