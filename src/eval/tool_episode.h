// One `eval tools` episode: a task under one seed, played against a server step by step.
// The transcript is kept as chat messages (system, user, assistant with reasoning_content and
// tool_calls, tool) and rendered per request as chat completions or Anthropic Messages.
//
// A step sends the transcript and applies the reply: its tool calls are run on the episode's
// own store and their results appended; a reply without tool calls is an answer, after which
// the next scripted user turn is sent, or the episode ends ("answered"). It also ends after
// max_steps requests ("max_steps") or when a request fails after its retries ("error").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/request.h"
#include "eval/runner.h"
#include "eval/tool_env.h"
#include "loadgen/client.h"

namespace mx::eval {

inline constexpr int kMaxToolSteps = 100;

struct Episode {
  const ToolTask* task = nullptr;
  uint64_t seed = 0;
  Store store;
  nlohmann::json messages = nlohmann::json::array();
  std::vector<std::string> answers;
  size_t next_user = 1;
  int steps = 0, tool_calls = 0, attempts = 0;
  bool done = false;
  std::string end;  // "answered", "max_steps", "error"
  std::string error_kind, error;
};

// The policy as system prompt and the first user turn.
Episode StartEpisode(const ToolTask& task, uint64_t seed);

// The streaming request body of the episode's next step, with the tools.
// REQUIRES: api is kChat or kMessages.
std::string EpisodeBody(const Episode& e, loadgen::Endpoint api, const std::string& model,
                        const Sampling& sampling);

// Applies one step's response (see above).
void Advance(Episode& e, const Response& r, int max_steps);

}  // namespace mx::eval
