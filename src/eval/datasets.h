// The JSONL formats the harness reads. Every loader names the file and 1-based line of a bad
// record and what was expected; blank lines are skipped.
//
// Question-answer (GSM8K and the bundled model's held-out arithmetic), one object per line:
//   {"question": "...", "answer": "worked steps ... #### 72", "key": "optional id"}
// The gold answer is ExtractNumber(answer) and must exist. Any other fields are ignored.
//
// Multiple choice (`eval mcq`, e.g. GPQA-Diamond exported by the user), one object per line:
//   {"question": "...", "choices": ["...", "...", ...], "answer": "B", "id": "optional"}
// 2 to 26 non-empty choices; "answer" is the letter of the correct choice as listed ('A' is
// choices[0]). The harness shuffles the choices per seed (ShuffledChoices).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mx::eval {

struct QaExample {
  std::string id;        // "key" when present, else "file:line"
  std::string question;  // as given
  std::string answer;    // the worked answer, used verbatim in few-shot prompts
  std::string gold;      // NormalizeNumber(ExtractNumber(answer))
};

struct McqExample {
  std::string id;
  std::string question;
  std::vector<std::string> choices;
  int answer = 0;  // index into choices
};

Result<std::vector<QaExample>> LoadQaJsonl(const std::string& path);
Result<std::vector<McqExample>> LoadMcqJsonl(const std::string& path);

// A permutation of 0..n-1 that depends only on (seed, example index), by Fisher-Yates over
// SplitMix64, so a run reproduces on any platform. order[k] is the original index of the
// choice shown in position k.
std::vector<int> ShuffledChoices(int n, uint64_t seed, int example_index);

}  // namespace mx::eval
