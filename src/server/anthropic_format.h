// Anthropic Messages responses: the message object (content blocks thinking / text / tool_use,
// stop_reason, stop_sequence, usage with the prefix cache's tokens as cache_read_input_tokens),
// and its SSE event sequence (message_start, ping, content_block_start / _delta / _stop,
// message_delta, message_stop). Errors have their shape in api_error.h.
//
// Thread-safety: one AnthropicOutput per request.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_output.h"

namespace mx::server {

class AnthropicOutput : public ApiOutput {
 public:
  // `id` "msg_..."; `prompt_tokens` for message_start's usage.
  AnthropicOutput(std::string id, std::string model, int64_t prompt_tokens);

  std::string StreamStart() override;
  std::string Delta(const ChoiceDelta& d) override;
  std::string Heartbeat() override;
  void Finish(const GenerationResult& r) override;
  std::string StreamEnd(const GenerationResult& r) override;
  nlohmann::ordered_json Final(const GenerationResult& r) override;

 private:
  // Opens a block of `type` unless it is the one open; returns its SSE events.
  std::string Open(const nlohmann::ordered_json& start);
  std::string CloseOpen();
  nlohmann::ordered_json Usage(const GenerationResult& r) const;

  std::string id_;
  std::string model_;
  int64_t prompt_tokens_;
  nlohmann::ordered_json blocks_ = nlohmann::ordered_json::array();
  std::string open_;  // type of the block still receiving deltas ("" none)
  std::string stop_reason_ = "end_turn";
  nlohmann::ordered_json stop_sequence_;
};

}  // namespace mx::server
