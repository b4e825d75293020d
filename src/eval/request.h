// What the harness sends: few-shot prompts and the OpenAI request body around them.
//
// Question-answer prompts (gsm8k, arith), with the shots taken in file order from the train
// split (the first K records; fixed so every run of a protocol sees the same prompt):
//   chat:        a multi-turn conversation, user = shot question, assistant = its worked
//                answer (verbatim, "#### N" included), ..., then user = the question;
//   completions: lm-evaluation-harness's gsm8k format, "Question: Q\nAnswer: A" per shot,
//                joined by "\n\n", ending "Question: Q\nAnswer:", with stop sequences
//                "Question:", "</s>", "<|im_end|>".
// Multiple-choice prompts follow simple-evals' GPQA template (one user turn; completions gets
// the same text): the instruction to end with "Answer: $LETTER", the question, then "A) ..."
// lines in the seed's shuffled order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/datasets.h"
#include "loadgen/client.h"

namespace mx::eval {

struct Sampling {
  double temperature = 0;
  int max_tokens = 256;
  std::vector<std::string> stop;
  nlohmann::json chat_template_kwargs;  // null = not sent
};

// A prompt is either chat messages (a JSON array) or completion text (a JSON string).
nlohmann::json QaPrompt(loadgen::Endpoint endpoint, const std::vector<QaExample>& shots,
                        const std::string& question);
// The stop sequences QaPrompt's format needs (none for chat).
std::vector<std::string> QaStops(loadgen::Endpoint endpoint);

// order: ShuffledChoices' permutation (order[k] = original index shown as letter k).
nlohmann::json McqPrompt(loadgen::Endpoint endpoint, const McqExample& example,
                         const std::vector<int>& order);

// The streaming request body for `prompt` ("seed" is sent so that temperature > 0 runs
// reproduce on servers that honour it).
std::string RequestBody(const std::string& model, const nlohmann::json& prompt,
                        const Sampling& sampling, uint64_t seed);

}  // namespace mx::eval
