// `bench sessions`: multi-turn agent sessions. N sessions run in parallel, each T turns in
// order; every turn sends the whole conversation so far and the server's reply goes back into
// it verbatim (its reasoning too: reasoning_content in chat, a thinking block in Messages, a
// reasoning item in Responses), followed by a synthetic tool result, so the context grows
// turn by turn the way a coding agent's does:
//   turn 1:  system (shared by all sessions) + the session's task (a user message)
//   turn t:  turn t-1's messages + its reply + a tool result (a user message; any template
//            accepts it, which a "tool" role without a real tool call would not)
// and the next turn is sent think_time_s after the reply ended (the tool running).
//
// What a perfect prefix cache could serve is known from the prompts: turn t repeats turn t-1's
// messages and reply verbatim, and turn 1 repeats the system prompt that a warm-up request
// sent first. The expected share = reused / prompt, both counted in the client's units
// (tokenizer tokens of the message texts with a tokenizer, else whitespace-separated words;
// a chat template's own tokens are not in either), is reported beside the hit ratio from the
// server's usage fields (cached / prompt tokens).
//
// Metrics per turn index and overall reuse ComputeMetrics (metrics.h) on the turns' records:
// TTFT, ITL, cache hits, output tokens; plus the output rate of a stream (output tokens / E2E,
// summed over the turns) and each session's completion time (its first request sent -> its
// last reply ended, think time included).
//
// An empty reply (the stream ended with [DONE] but carried no text and no tool call) fails the
// turn as "no_output" and ends its session, unless accept_empty_replies: then the turn is
// completed with an empty answer, sent back as an empty assistant message, its TTFT is its E2E
// (nothing was shown before the reply ended) and it has no ITL gaps; such turns are counted
// (empty_replies). Seen with llama.cpp-family servers on random weights, whose streams drop
// text that is not valid UTF-8.
//
// Thread-safety: RunSessions runs one thread per session, each sending through RunRequests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "loadgen/client.h"
#include "loadgen/metrics.h"
#include "tokenizer/tokenizer.h"

namespace mx::loadgen {

struct SessionSpec {
  int sessions = 8;            // in parallel
  int turns = 8;               // per session
  int system_len = 2000;       // shared system prompt
  int first_user_len = 1000;   // the session's task
  int tool_result_len = 2500;  // each later turn's tool result
  double range_ratio = 1.0;    // tool results uniform in [max(1, floor(L * r)), L]
  int output_len = 256;        // max tokens per turn
  double think_time_s = 0;     // between a reply's end and the next request
  bool ignore_eos = true;      // chat only (the other APIs have no such field)
  bool warm_system = true;     // send the system prompt once (max tokens 1) before measuring
  uint64_t seed = 1;
  // An empty reply completes its turn instead of failing it (see above).
  bool accept_empty_replies = false;
};

// Limits on what the flags may ask for (a bound on the client's memory and threads).
inline constexpr int kMaxSessions = 1024;
inline constexpr int kMaxTurns = 1000;
inline constexpr int kMaxMessageLen = 1 << 20;

// InvalidArgument naming the flag when a value is out of range.
Status ValidateSpec(const SessionSpec& spec);

struct TurnRecord {
  int session = 0, turn = 0;  // 0-based
  RequestRecord rec;          // times relative to the run's start
  int64_t prompt_units = 0;   // the request's message texts, in the client's units
  int64_t reused_units = 0;   // of them, repeated from the previous turn (or the system prompt)
  int64_t reply_units = 0;    // the reply sent back into the next turn (reasoning + answer)
  bool empty_reply = false;   // accepted with accept_empty_replies (rec.success is true)
};

struct SessionRecord {
  bool completed = false;  // every turn succeeded
  int turns_done = 0;
  double start_s = 0, end_s = 0;
  std::string error;  // the failed turn's error kind and message
};

struct SessionsRun {
  std::vector<TurnRecord> turns;  // session-major, successful and failed (a failed turn ends
                                  // its session)
  std::vector<SessionRecord> sessions;
  double duration_s = 0;  // first request -> last reply
  bool tokenizer_units = false;
  int warmup_failures = 0;
};

struct SessionsConfig {
  ClientOptions client;  // endpoint: kChat, kMessages or kResponses; keep_text is forced on
  SessionSpec spec;
  const tok::Tokenizer* tokenizer = nullptr;
  // Called after every turn (from the session threads, serialized).
  std::function<void(int turns_done, int turns_total, int sessions_done, int failed,
                     double elapsed_s)>
      progress;
};

// The request body of one turn (exposed for tests). `conversation` alternates user text,
// assistant reply (reasoning, answer), user text, ...: entries with role "user" or "assistant".
struct Message {
  std::string role;  // "user" or "assistant"
  std::string text;  // the user text or the assistant's answer
  std::string reasoning;
};
std::string SessionRequestBody(Endpoint api, const std::string& model, const std::string& system,
                               const std::vector<Message>& conversation, int max_tokens,
                               bool ignore_eos);

// Unavailable when the warm-up request fails (the server is not there).
Result<SessionsRun> RunSessions(const SessionsConfig& config);

struct TurnStats {
  int turn = -1;  // 0-based; -1 = all turns
  BenchMetrics metrics;
  int64_t prompt_units = 0, reused_units = 0;
  double expected_hit_pct = 0;           // 100 * reused / prompt
  double stream_output_tok_s = 0;        // output tokens / E2E, summed over the turns
  int empty_replies = 0;                 // completed turns whose reply was empty
  double mean_ttft_with_content_ms = 0;  // mean TTFT of the completed turns that were not empty
};

struct SessionsReport {
  std::string title, command, api, base_url, model;
  SessionSpec spec;
  bool tokenizer_units = false;
  int completed_sessions = 0, failed_sessions = 0;
  std::map<std::string, int> errors_by_kind;
  Summary completion_s;  // of completed sessions, seconds
  TurnStats overall;
  std::vector<TurnStats> per_turn;
};

// Per-turn and overall statistics; the caller fills title, command, api, base_url, model, spec.
SessionsReport SummarizeSessions(const SessionsRun& run);

nlohmann::json SessionsJson(const SessionsReport& r);
std::string SessionsTable(const SessionsReport& r);
// A self-contained page: TTFT p50/p95 per turn, hit ratio measured vs expected per turn,
// prompt size per turn, and the per-turn table.
std::string SessionsHtml(const SessionsReport& r);

}  // namespace mx::loadgen
