// `bench single-stream`, after Artificial Analysis' method (serving-benchmarks.md §5): one
// request at a time, each with a unique natural-language prompt (a window of Debian's
// /usr/share/common-licenses texts behind a per-run nonce, so neither the prefix cache nor
// earlier runs help), streaming, max_tokens with ignore_eos. Per run:
//   TTFT         = first streamed chunk with text - request sent
//   output speed = (tokens - tokens of the first chunk) / (end of stream - first chunk)
// counted twice: with the server's usage.completion_tokens and with the model's tokenizer on
// the streamed text. Reported as medians over runs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "loadgen/client.h"
#include "tokenizer/tokenizer.h"

namespace mx::loadgen {

struct SingleStreamSpec {
  int input_len = 10000;
  int output_len = 1500;
  int runs = 5;
  std::string corpus_dir = "/usr/share/common-licenses";
  uint64_t seed = 0;
};

// Natural-language prompts of exactly spec.input_len tokens (by `tokenizer`), one per run.
Result<std::vector<BenchPrompt>> MakeNaturalPrompts(const SingleStreamSpec& spec,
                                                    const tok::Tokenizer& tokenizer);

struct SingleStreamRun {
  RequestRecord record;
  int server_tokens = 0;     // usage.completion_tokens
  int tokenizer_tokens = 0;  // model tokenizer on the streamed text
  int first_chunk_tokens = 0;
  double speed_server = 0;     // tok/s after the first chunk
  double speed_tokenizer = 0;  // same, tokenizer-counted
};

struct SingleStreamResult {
  std::vector<SingleStreamRun> runs;
  double median_ttft_ms = 0;
  double median_e2e_s = 0;
  double median_speed_server = 0;
  double median_speed_tokenizer = 0;
  int failed = 0;
};

// REQUIRES: options.keep_text (set by the call).
SingleStreamResult RunSingleStream(ClientOptions options, const std::vector<BenchPrompt>& prompts,
                                   const tok::Tokenizer& tokenizer);

nlohmann::json SingleStreamJson(const SingleStreamSpec& spec, const SingleStreamResult& r);
std::string SingleStreamTable(const SingleStreamResult& r);

}  // namespace mx::loadgen
