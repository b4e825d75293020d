// The engine's public face for the server and offline tools: a thread-safe submit / stream /
// abort interface over one engine loop thread (continuous batching, chunked prefill, paged KV
// cache with a radix prefix cache, sampling, speculative decoding when enabled). Requests and
// outputs are native structs: the engine never sees JSON or HTTP.
//
// Thread-safety: every public method of Engine may be called from any thread. A
// RequestStream is owned by one consumer thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/model_load_options.h"
#include "engine/sampler.h"
#include "model/kv_store.h"

namespace mx {

class Communicator;  // parallel/communicator.h
namespace grammar {
class CompiledGrammar;  // grammar/token_mask.h
}

enum class FinishReason { kNone, kStop, kLength, kAbort };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "abort"

// The most top-n alternatives per token a request may ask for (the server's limit too).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, already templated and tokenized
  SamplingParams sampling;      // temperature, top_k, top_p, min_p, seed
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS ids
  std::vector<std::string> stop;        // stop strings, matched across token boundaries
  int32_t top_logprobs = -1;  // -1: no logprobs; 0: sampled token only; n <= kMaxTopLogprobs: top-n
  // Structured output (engine/request_constraint.h): every token is drawn from what this
  // grammar allows, and the request stops when the grammar is complete. With
  // constraint_after_token >= 0 the grammar applies only after that token (GLM's </think>).
  // With constraint_repeats the grammar is a span that may recur: it applies after each
  // constraint_after_token until complete, and never ends the request (tool_choice auto: the
  // rest of a tool call once the model writes <tool_call>; engine/request_constraint.h).
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
  int32_t constraint_after_token = -1;
  bool constraint_repeats = false;
  // A thinking budget (with think_end_token >= 0 and thinking_budget >= 0): the output is inside
  // the reasoning from its start when reasoning_open (the prompt left `<think>` open), or from
  // a first output token think_start_token; after thinking_budget tokens of reasoning the next
  // token is think_end_token (the model's own end of thinking), and the answer follows. A
  // tool_call_token written inside the reasoning ends it too (GLM may open a call there).
  int32_t thinking_budget = -1;
  int32_t think_end_token = -1;
  int32_t think_start_token = -1;
  int32_t tool_call_token = -1;
  bool reasoning_open = false;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

// One chunk of output: tokens produced since the previous chunk. The last chunk of a request
// has finish != kNone. With a tokenizer the engine decodes each request's output once
// (engine/output_text.h) and sends the text: text[i] is what tokens[i] completed (whole UTF-8
// characters; "" for the stop token or EOS that ended the request, which is not shown), and the
// last chunk's text_tail is what the detokenizer still held. A matched stop string ends the
// request with `stop_trim_bytes`: how many bytes at the end of the text sent (all chunks' text)
// belong to the match and must not be shown; text_tail is then empty.
struct GenerationChunk {
  std::vector<int32_t> tokens;
  std::vector<std::string> text;               // per token, when the engine has a tokenizer
  std::vector<TokenLogprob> logprobs;          // per token, when requested
  std::vector<std::vector<TokenLogprob>> top;  // per token: top-n alternatives
  FinishReason finish = FinishReason::kNone;
  std::string matched_stop;  // the stop string or "" (stop token / EOS)
  std::optional<int32_t> matched_stop_token;
  Status error;                     // non-ok: the request failed
  int32_t stop_trim_bytes = 0;      // see above; set with matched_stop
  std::string text_tail;            // see above; on the last chunk
  std::vector<double> token_times;  // per token: seconds since the request was submitted
  // Filled on the last chunk:
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens served from the radix cache
  double queue_seconds = 0;
  double ttft_seconds = 0;
  double e2e_seconds = 0;
};

using RequestId = uint64_t;

class RequestStream {
 public:
  virtual ~RequestStream() = default;
  virtual RequestId id() const = 0;
  // Blocks up to `timeout` for the next chunk; nullopt on timeout. After a chunk with
  // finish != kNone, returns that request's end forever.
  virtual std::optional<GenerationChunk> Next(std::chrono::milliseconds timeout) = 0;
};

// One data-parallel replica's load (engine/dp_engine.h), index = dp_rank.
struct DpReplicaStats {
  int64_t running = 0;
  int64_t queued = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_pages_total = 0;
  int64_t requests_routed = 0;  // requests the router sent it
  bool healthy = true;          // false: failed (Engine::Health), out of rotation
};

// What the engine counts since it started (monotonic; /metrics exposes them as counters).
struct EngineCounters {
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t cached_prompt_tokens_total = 0;
  int64_t radix_lookups = 0;
  int64_t radix_hit_tokens = 0;  // hit rate = cached / prompt tokens looked up
  int64_t requests_finished = 0;
  int64_t requests_aborted = 0;
  int64_t requests_rejected = 0;
  int64_t retractions = 0;
  double forward_seconds = 0;  // in the target model's forwards (every step's)
};

// The engine's state now.
struct EngineGauges {
  int64_t running = 0;
  int64_t queued = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_pages_total = 0;
  int64_t kv_page_size = 0;
};

// Speculative decoding (all 0 when off).
struct SpeculativeStats {
  // Seconds in the MTP layer's passes (draft-extend with any catch-up, and the draft steps) and
  // the rows they ran over: what speculation spends besides its verify rows.
  double mtp_seconds = 0;
  int64_t mtp_rows = 0;
  // Verify steps (one per request and decode forward), drafts proposed and accepted, and per
  // draft position i (0 = the first draft) how often one was proposed and accepted. Mean
  // accept length = tokens per verify step, bonus included.
  double accept_length_mean = 0;
  int64_t verify_steps = 0;
  int64_t drafts_proposed = 0;
  int64_t tokens_accepted = 0;
  std::vector<int64_t> proposed_at;
  std::vector<int64_t> accepted_at;
  // The drafts of the last decode step (fixed: the configured steps) and how many decode steps
  // ran with each count [0..max steps]. automatic (--speculative-num-steps auto): whether that
  // step was a probe, and the chooser's estimates for it: tokens/s with those drafts and with
  // none, and tokens per verify.
  bool automatic = false;
  int32_t steps_chosen = 0;
  bool probe = false;
  double estimate_tokens_per_s = 0;
  double estimate_off_tokens_per_s = 0;
  double estimate_accept_length = 0;
  std::vector<int64_t> steps_histogram;
};

// What Engine::Stats reports. server/metrics.cpp's one table says how each field is exported
// (/metrics, /get_server_info and the web page read that table).
struct EngineStats {
  EngineGauges gauges;
  EngineCounters counters;
  SpeculativeStats spec;
  // Data parallelism (--dp > 1): every field above sums the replicas (AddReplicaStats); this
  // lists each one.
  std::vector<DpReplicaStats> dp_replicas;
};

// Adds one data-parallel replica's stats into a group's `total`: counters and gauges sum, the
// mean accept length is weighted by verify steps, per-position and per-step vectors add
// elementwise, and the speculative `auto` choice shown is the first replica's.
void AddReplicaStats(const EngineStats& replica, EngineStats* total);

// With --speculative-num-steps auto and no --speculative-num-draft-tokens: the most drafts.
inline constexpr int32_t kSpeculativeAutoMaxSteps = 5;

// Which requests a step admits first: in arrival order, or those with the longest cached prefix.
enum class SchedulePolicy { kFcfs, kLpm };
Result<SchedulePolicy> ParseSchedulePolicy(std::string_view name);  // fcfs|lpm
const char* SchedulePolicyName(SchedulePolicy p);

enum class SpeculativeAlgorithm { kNone, kMtp };
// "" = none; MTP and its aliases EAGLE, NEXTN (any case). An error names the value.
Result<SpeculativeAlgorithm> ParseSpeculativeAlgorithm(std::string_view name);

// Speculative decoding with the model's MTP layer (sglang's flags): num_steps nullopt = auto:
// 0..num_draft_tokens-1 drafts (default 0..kSpeculativeAutoMaxSteps) chosen per decode step
// (engine/spec_chooser.h); eagle_topk must be 1 (a chain); with a fixed num_steps,
// num_draft_tokens 0 = num_steps + 1, otherwise it must equal that.
struct SpeculativeOptions {
  SpeculativeAlgorithm algorithm = SpeculativeAlgorithm::kNone;
  std::optional<int32_t> num_steps;  // nullopt: auto (with an algorithm)
  int32_t eagle_topk = 1;
  int32_t num_draft_tokens = 0;
};

// Flags with sglang's names and meanings (the CLI maps --page-size, --max-total-tokens, ...).
// Strings from the command line are parsed into these types where they are read (src/cli).
struct EngineOptions {
  // The model directory, kernels, tuned MoE configs (--tuned-config-dir: looked up after the
  // configs built in from configs/moe/; without one the MoE runs its untuned default and the
  // log says how to tune it) and whether to log that (--dp: the first replica says it for all).
  // CreateEngine sets model.shard from tp / expert_parallel.
  ModelLoadOptions model;
  int threads = 0;  // 0 = one per core
  // Structured-output masks computed on a thread beside the forward (SchedulerConfig); unset:
  // when the forward's threads leave a core idle.
  std::optional<bool> overlap_masks;
  int64_t page_size = 64;        // tokens per KV page
  int64_t max_total_tokens = 0;  // KV capacity in tokens; 0 = from mem_fraction
  double mem_fraction = 0.3;     // of free memory for the KV pool when max_total_tokens == 0
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kBf16;  // --kv-cache-dtype auto = bf16
  int32_t max_running_requests = 64;
  int32_t max_queued_requests = 1024;  // beyond: Submit returns ResourceExhausted
  int64_t chunked_prefill_size = 512;  // prefill tokens per step
  // While requests decode, each step's prefill tokens are cut to what the measured step costs
  // say ends the step within this many milliseconds (engine/step_costs.h), so a long prompt
  // cannot starve the streams; 0: off (chunked_prefill_size every step).
  double max_decode_gap_ms = 0.0;
  SchedulePolicy schedule_policy = SchedulePolicy::kFcfs;
  bool disable_radix_cache = false;
  SpeculativeOptions speculative;
  // Tensor / expert parallelism (engine/tp_runner.h): a group of `tp` model shards, MoE split
  // by width or, with expert_parallel, by whole experts. tp_comm null: the ranks are threads of
  // this process; else rank 0's communicator of a group of that size (MPI), whose other ranks
  // run RunTpWorker. With tp_comm null and max_total_tokens 0, each rank's KV copy gets
  // mem_fraction / tp (MLA keeps the whole latent cache on every rank).
  int tp = 1;
  bool expert_parallel = false;
  Communicator* tp_comm = nullptr;  // not owned
};

// Which MoE kernel config the engine runs with, decided at load (tune/moe_tuning.h).
struct KernelTuningInfo {
  std::string state = "none";  // "tuned", "default" (no config for this shape), "none" (no MoE)
  std::string config;          // the file in use, or the file name that was looked for
  std::string shape;           // "bf16 model_dim=...,moe_inter=...,E=...,topk=...,shared=..."
  std::string tune_command;    // state "default": the command that makes the config
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Errors: InvalidArgument (empty prompt, prompt + max_tokens beyond the context window, ids
  // out of range), ResourceExhausted (queue full: the server answers 429), Unavailable
  // (shutting down, or failed: see Health).
  virtual Result<std::unique_ptr<RequestStream>> Submit(GenerationRequest request) = 0;
  // Aborts a queued or running request; its pages are released or cached within one step and
  // its stream ends with FinishReason::kAbort. Unknown ids are ignored.
  virtual void Abort(RequestId id) = 0;
  virtual EngineStats Stats() const = 0;
  virtual void FlushCache() = 0;
  // Stops the loop after finishing (or aborting, past the deadline) what is running.
  virtual void Shutdown(std::chrono::milliseconds drain_timeout) = 0;
  virtual int64_t context_window() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual KernelTuningInfo kernel_tuning() const { return {}; }
  // The ids that end generation (config.json + generation_config.json); empty if unknown.
  virtual std::vector<int32_t> eos_ids() const { return {}; }
  // Ok while the engine serves. Once its model runner reports itself broken (model_runner.h:
  // Unavailable or Aborted, e.g. a tensor-parallel peer rank died) the engine has failed for
  // good: every request it held has ended with that error, Submit returns this status, and
  // it is Unavailable("engine failed: <the runner's message>"). A data-parallel group
  // (dp_engine.h) is ok while one replica is.
  virtual Status Health() const { return Status::Ok(); }
};

// Loads the model (and its tokenizer.json when present: output text and stop strings) and
// starts the engine loop thread. Errors name the file, tensor or flag that is wrong.
Result<std::unique_ptr<Engine>> CreateEngine(const EngineOptions& options);

}  // namespace mx
