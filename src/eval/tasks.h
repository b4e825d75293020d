// The eval tasks end to end: load the data, build the prompts for every (seed, question), send
// them, extract and score, and write the per-example log (JSONL, one object per sample) and
// the summary JSON that `eval compare` reads.
//
// Per-example log fields: task, seed, example (0-based index), id, prompt (chat messages or
// completion text), output, extracted, gold, correct, attempts, prompt_tokens, completion_tokens,
// latency_s, and error_kind/error for a request that failed after its retries (scored wrong).
// Multiple choice adds "order" (the original index of each shown choice).
//
// Summary fields: task, protocol (one line), model, base_url, endpoint, data, num_examples,
// num_shots, seeds (K), seed (the first; seed s sends seed + s), temperature, max_tokens,
// accuracy and stderr (scoring.h: clustered by question over the K seeds), correct, samples,
// per_seed [{seed, accuracy, stderr, correct}], errors, errors_by_kind, retries,
// duration_s, output (the log's path), summary (its own path), command, mxserve_version.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "eval/request.h"
#include "eval/runner.h"

namespace mx::eval {

struct TaskOptions {
  std::string task;  // "gsm8k", "arith", "mcq", "tools"
  ServerOptions server;
  Sampling sampling;
  std::string data;        // test/eval split
  std::string train_data;  // few-shot source (QA tasks); needed when num_shots > 0
  int num_examples = 0;    // the first N of `data`; 0 = all
  int num_shots = 0;       // QA tasks only
  int seeds = 1;
  uint64_t seed = 0;
  bool shuffle = true;  // mcq: shuffle choices per seed
  std::string output;   // per-example JSONL; "" = not written
  std::string summary;  // summary JSON; "" = next to `output` (<output>.summary.json), or none
  std::string command;  // the command line, recorded in the summary
};

// gsm8k and arith: exact match of NormalizeNumber(ExtractNumber(output)) with the gold number.
Result<nlohmann::json> RunQaTask(const TaskOptions& options);

// mcq: ExtractLetter(output) against the letter the gold choice got under the seed's shuffle.
Result<nlohmann::json> RunMcqTask(const TaskOptions& options);

// tools (tool_env.h, tool_episode.h): every task under every seed, played step by step (the
// steps of all episodes sent together), judged by the final store and the answers. The
// summary's accuracy is pass^1 (with the clustered standard error) and it adds
// "pass_hat_k": {"1": ..., ..., "K": ...}, pass^k = mean over tasks of C(c, k) / C(K, k) for
// c successes in K seeds (τ²-bench's estimator), and "per_task" [{id, successes}]. The log
// has one object per (task, seed): id, seed, success, reasons, end, steps, tool_calls,
// answers, messages (the transcript), final_state when it is wrong, attempts, errors.
// REQUIRES: options.server.endpoint is kChat or kMessages.
Result<nlohmann::json> RunToolsTask(const TaskOptions& options, int max_steps);

// pass^k = mean_i C(successes[i], k) / C(trials, k); 0 when k > trials.
double PassHatK(const std::vector<int>& successes, int trials, int k);

// The bundled model's 500 held-out problems: tests/data/arith/heldout.jsonl under the working
// directory, else under the nearest folder above the running executable that has it (a build
// inside a checkout); the working directory's path (which fails to open, naming it) when
// neither has it. No path is compiled in.
std::string DefaultArithData();
// The first of `dir` and its parents under which `rel` exists, joined with it; empty if none.
std::string FindUpwards(const std::filesystem::path& dir, const std::string& rel);

// "out.jsonl" -> "out.summary.json" (any other name gets ".summary.json" appended).
std::string DefaultSummaryPath(const std::string& output);

}  // namespace mx::eval
