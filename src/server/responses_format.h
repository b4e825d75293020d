// OpenAI Responses output: the response object (output items reasoning / message with
// output_text / function_call, status completed or incomplete with incomplete_details, usage
// with input_tokens_details.cached_tokens) and its typed stream events, each with a
// sequence_number (response.created, response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta / .done,
// response.reasoning_text.delta / .done, response.function_call_arguments.delta / .done,
// response.content_part.done, response.output_item.done, response.completed or
// response.incomplete or response.failed). With store, the finished response, its input items
// and the conversation through its output go to the ResponseStore.
//
// Thread-safety: one ResponsesOutput per request.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_output.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace mx::server {

class ResponsesOutput : public ApiOutput {
 public:
  // `id` "resp_..."; `store` null when the request said store: false.
  ResponsesOutput(std::string id, std::string model, int64_t created_at, ResponsesContext ctx,
                  ResponseStore* store);

  std::string StreamStart() override;
  // A `response.in_progress` event (the keep-alive of a quiet stream).
  std::string Heartbeat() override;
  std::string Delta(const ChoiceDelta& d) override;
  void Finish(const GenerationResult& r) override;
  std::string StreamEnd(const GenerationResult& r) override;
  nlohmann::ordered_json Final(const GenerationResult& r) override;

 private:
  std::string Event(const std::string& type, nlohmann::ordered_json fields);
  // The response object with the given status and output (usage when `r` is given).
  nlohmann::ordered_json Response(const std::string& status, const GenerationResult* r) const;
  std::string OpenItem(nlohmann::ordered_json item);
  std::string CloseItem();
  // The output as the chat message a later previous_response_id continues from.
  nlohmann::ordered_json AsChatMessage() const;

  std::string id_;
  std::string model_;
  int64_t created_at_;
  ResponsesContext ctx_;
  ResponseStore* store_;
  int64_t sequence_ = 0;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();
  bool open_ = false;  // output_.back() still receives deltas
  std::string status_ = "completed";
  nlohmann::ordered_json final_;  // set by Finish
  std::string pending_;           // events of the item Finish closed, for StreamEnd
};

}  // namespace mx::server
