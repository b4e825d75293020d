#include "eval/request.h"

namespace mx::eval {

using json = nlohmann::json;
using loadgen::Endpoint;

json QaPrompt(Endpoint endpoint, const std::vector<QaExample>& shots, const std::string& question) {
  if (endpoint == Endpoint::kChat) {
    json messages = json::array();
    for (const QaExample& s : shots) {
      messages.push_back({{"role", "user"}, {"content", s.question}});
      messages.push_back({{"role", "assistant"}, {"content", s.answer}});
    }
    messages.push_back({{"role", "user"}, {"content", question}});
    return messages;
  }
  std::string text;
  for (const QaExample& s : shots)
    text += "Question: " + s.question + "\nAnswer: " + s.answer + "\n\n";
  text += "Question: " + question + "\nAnswer:";
  return text;
}

std::vector<std::string> QaStops(Endpoint endpoint) {
  if (endpoint == Endpoint::kChat) return {};
  return {"Question:", "</s>", "<|im_end|>"};
}

json McqPrompt(Endpoint endpoint, const McqExample& example, const std::vector<int>& order) {
  std::string letters;
  for (size_t k = 0; k < order.size(); ++k) letters += static_cast<char>('A' + k);
  std::string text =
      "Answer the following multiple choice question. The last line of your response should be "
      "of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of " +
      letters + ". Think step by step before answering.\n\n" + example.question + "\n";
  for (size_t k = 0; k < order.size(); ++k) {
    text += "\n";
    text += static_cast<char>('A' + k);
    text += ") " + example.choices[order[k]];
  }
  if (endpoint == Endpoint::kChat) return json::array({{{"role", "user"}, {"content", text}}});
  return text + "\n\n";
}

std::string RequestBody(const std::string& model, const json& prompt, const Sampling& sampling,
                        uint64_t seed) {
  json j;
  j["model"] = model;
  if (prompt.is_array()) {
    j["messages"] = prompt;
    j["max_completion_tokens"] = sampling.max_tokens;
    if (!sampling.chat_template_kwargs.is_null()) {
      j["chat_template_kwargs"] = sampling.chat_template_kwargs;
    }
  } else {
    j["prompt"] = prompt;
  }
  j["max_tokens"] = sampling.max_tokens;
  j["temperature"] = sampling.temperature;
  j["seed"] = seed;
  if (!sampling.stop.empty()) j["stop"] = sampling.stop;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace mx::eval
