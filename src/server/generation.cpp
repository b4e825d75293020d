// Generation routes: /v1/chat/completions, /v1/completions, /generate, and /v1/messages and
// /v1/responses (chats whose bodies were translated at the edge and whose output an ApiOutput
// shapes; api_output.h). One HTTP request becomes prompts x n engine requests ("choices"); a pump
// reads their streams on the request's handler thread, runs each through its ChoiceOutput and
// writes SSE events or, at the end, one JSON object (headers included: nothing is committed before
// the result exists). Every disconnect_poll it asks the transport whether the client has hung up
// (the socket is watched, so this needs no write) and if so aborts the engine requests.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "base/log.h"
#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/api_output.h"
#include "server/choice_output.h"
#include "server/openai_format.h"
#include "server/reasoning_parser.h"
#include "server/responses_format.h"
#include "server/responses_request.h"
#include "server/server_impl.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Prepared {
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompt_texts;  // echo
  bool reasoning_open = false;
};

struct Choice {
  int index = 0;
  int prompt_index = 0;
  std::unique_ptr<RequestStream> stream;
  std::unique_ptr<ChoiceOutput> out;
  bool done = false;
  bool sent_first = false;
  GenerationChunk final_info;  // prompt/cached tokens and timings from the last chunk
  Clock::time_point last_token;
  bool got_first = false;
  int64_t text_offset = 0;  // completions logprobs
  std::string cumulative;   // /generate streaming sends cumulative text
  bool ending = false;      // aborted by the server: its output is complete
};

struct Job {
  std::string id;
  int64_t created = 0;
  ServedModel* model = nullptr;
  ParsedRequest req;
  Prepared prep;
  std::vector<Choice> choices;
  ActiveJob active;
  Clock::time_point start;
  std::optional<ApiError> error;
  // Messages and Responses (one choice): how their output is shaped.
  std::unique_ptr<ApiOutput> api;
  bool client_gone = false;
  Clock::time_point last_write;  // of the last bytes sent (heartbeats are due after a poll)
};

const char* PromptParam(ApiKind kind) {
  switch (kind) {
    case ApiKind::kChat:
    case ApiKind::kMessages:
      return "messages";
    case ApiKind::kResponses:
      return "input";
    case ApiKind::kGenerate:
      return "text";
    case ApiKind::kCompletion:
      break;
  }
  return "prompt";
}

std::optional<ApiError> Prepare(ServedModel& m, ParsedRequest& r, Prepared* p) {
  const int64_t ctx = m.engine->context_window();
  const int64_t vocab = m.engine->vocab_size();
  const char* prompt_param = PromptParam(r.kind);
  if (IsChatLike(r.kind)) {
    if (!m.chat_template) {
      return BadRequest(
          prompt_param,
          fmt::format("model '{}' has no chat template; use /v1/completions", m.name));
    }
    auto text = m.RenderChat(r.messages, r.tools, r.chat_template_kwargs);
    if (!text.ok()) return BadRequest(prompt_param, "chat template: " + text.status().message());
    p->reasoning_open = PromptOpensReasoning(*text);
    p->prompt_ids.push_back(m.tokenizer.Encode(*text));
    p->prompt_texts.push_back(*text);
  } else {
    for (const PromptInput& in : r.prompts) {
      if (std::holds_alternative<std::string>(in)) {
        p->prompt_ids.push_back(m.tokenizer.Encode(std::get<std::string>(in)));
        p->prompt_texts.push_back(std::get<std::string>(in));
      } else {
        const auto& ids = std::get<std::vector<int32_t>>(in);
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] >= vocab) {
            return BadRequest(r.kind == ApiKind::kGenerate ? "input_ids" : "prompt",
                              fmt::format("token id {} at index {} is outside the vocabulary "
                                          "[0, {})",
                                          ids[i], i, vocab));
          }
        }
        p->prompt_ids.push_back(ids);
        p->prompt_texts.push_back(r.echo ? m.tokenizer.Decode(ids) : std::string());
      }
    }
  }
  int64_t longest = 0;
  for (const auto& ids : p->prompt_ids) {
    if (ids.empty()) return BadRequest(prompt_param, "the prompt encodes to no tokens");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ids.size()));
  }
  if (longest >= ctx) {
    return BadRequest(
        prompt_param,
        fmt::format("the prompt has {} tokens; the context window is {} tokens", longest, ctx));
  }
  if (!r.max_tokens_given && r.kind != ApiKind::kCompletion) {
    r.gen.max_tokens = static_cast<int32_t>(ctx - longest);
  }
  if (longest + r.gen.max_tokens > ctx) {
    const char* param =
        r.kind == ApiKind::kGenerate ? "sampling_params.max_new_tokens" : "max_tokens";
    return BadRequest(param, fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds "
                                         "the context window ({} tokens)",
                                         longest, r.gen.max_tokens, ctx));
  }
  if (r.gen.min_tokens > r.gen.max_tokens) r.gen.min_tokens = r.gen.max_tokens;
  return std::nullopt;
}

// A fresh seed for a choice whose request gave none: identical requests at temperature > 0
// differ, as with OpenAI, vLLM and sglang. Thread-safe.
uint64_t DrawSeed() {
  static const uint64_t salt = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  uint64_t z = salt + 0x9E3779B97F4A7C15ull * (counter.fetch_add(1) + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Submits prompts x n engine requests; their ids join job.active.ids under `jobs_mu` (which
// /abort_request holds while it reads them).
std::optional<ApiError> SubmitAll(Job& job, Mutex& jobs_mu, const ServerOptions& options) {
  ServedModel& m = *job.model;
  ParsedRequest& r = job.req;
  ChoiceOptions co;
  co.skip_special_tokens = r.skip_special_tokens;
  co.stop = r.gen.stop;
  const bool chat = IsChatLike(r.kind);
  co.split_reasoning = chat && r.separate_reasoning && m.tokenizer.TokenId("</think>").has_value();
  co.reasoning_starts_open = job.prep.reasoning_open;
  co.parse_tool_calls = chat && r.parse_tool_calls;
  co.tools = r.tools;
  co.max_tool_calls = r.parallel_tool_calls ? 0 : 1;
  const auto think_start = m.tokenizer.TokenId("<think>");
  const auto think_end = m.tokenizer.TokenId("</think>");
  const auto tool_call = m.tokenizer.TokenId("<tool_call>");
  co.think_start_token = chat && think_start ? *think_start : -1;
  co.think_end_token = chat && think_end ? *think_end : -1;
  co.tool_call_token = co.parse_tool_calls && tool_call ? *tool_call : -1;
  job.active.engine = m.engine.get();
  if (r.constraint) {
    auto g = m.grammars().Get(*r.constraint);
    if (!g.ok()) {
      ApiError e = BadRequest(
          r.constraint_param,
          fmt::format("{} {}: {}{}", r.constraint_param,
                      grammar::ConstraintKindName(r.constraint->kind), g.status().message(),
                      g.status().code() == StatusCode::kResourceExhausted
                          ? " (the server's --grammar-max-* flags set the limits)"
                          : ""));
      return e;
    }
    r.gen.constraint = *g;
    // A reasoning answer starts after </think>: the thinking stays free.
    if (chat && job.prep.reasoning_open && think_end) r.gen.constraint_after_token = *think_end;
  } else if (co.parse_tool_calls && tool_call && options.tool_call_constraint) {
    // tool_choice auto: once the model opens a call, the rest of it follows the declared tools'
    // grammar, so that what it writes parses (grammar/tool_call_grammar.h, after_open).
    const Json spec{{"tools", r.tools}, {"name", nullptr}, {"after_open", true}};
    auto g = m.grammars().Get({grammar::ConstraintKind::kToolCall, Dump(spec), {}});
    if (g.ok()) {
      r.gen.constraint = *g;
      r.gen.constraint_after_token = *tool_call;
      r.gen.constraint_repeats = true;
    } else {
      // note: a schema the grammar cannot express (or past its limits) leaves the calls free;
      // the parser still types and checks them.
      MX_LOG_DEBUG("request {}: tool calls unconstrained: {}", job.id, g.status().message());
    }
  }
  if (chat && think_end && r.thinking_budget >= 0) {
    // The engine ends the reasoning with </think> after the budget (GenerationRequest).
    r.gen.thinking_budget = r.thinking_budget;
    r.gen.think_end_token = *think_end;
    r.gen.think_start_token = think_start ? *think_start : -1;
    r.gen.tool_call_token = co.tool_call_token;
    r.gen.reasoning_open = job.prep.reasoning_open;
  }
  for (size_t p = 0; p < job.prep.prompt_ids.size(); ++p) {
    for (int k = 0; k < r.n; ++k) {
      GenerationRequest g = r.gen;
      g.prompt = job.prep.prompt_ids[p];
      g.sampling.seed = r.seed_given ? r.gen.sampling.seed + static_cast<uint64_t>(k) : DrawSeed();
      auto s = m.engine->Submit(std::move(g));
      if (!s.ok()) {
        for (RequestId id : job.active.ids) m.engine->Abort(id);
        return FromStatus(s.status(), PromptParam(r.kind));
      }
      Choice c;
      c.index = static_cast<int>(job.choices.size());
      c.prompt_index = static_cast<int>(p);
      c.stream = std::move(*s);
      c.out = std::make_unique<ChoiceOutput>(m.tokenizer, co);
      {
        MutexLock lock(jobs_mu);
        job.active.ids.push_back(c.stream->id());
      }
      job.choices.push_back(std::move(c));
    }
  }
  m.metrics.requests_total.fetch_add(1);
  return std::nullopt;
}

void AbortAll(Job& job) {
  for (Choice& c : job.choices) {
    if (!c.done) job.model->engine->Abort(c.stream->id());
  }
}

// Reads every choice's stream until all are done. on_delta returns false when the client is
// gone; heartbeat likewise. Returns false when the client went away (requests aborted).
bool Pump(Server::Impl& impl, Job& job,
          const std::function<bool(Choice&, const ChoiceDelta&)>& on_delta,
          const std::function<bool()>& heartbeat) {
  const auto poll = impl.options.disconnect_poll;
  job.last_write = Clock::now();
  bool aborting = false;
  Clock::time_point abort_started;
  auto remaining = [&] {
    int n = 0;
    for (const Choice& c : job.choices) n += !c.done;
    return n;
  };
  while (remaining() > 0) {
    if (!aborting && (job.active.abort.load() || impl.DeadlinePassed())) {
      AbortAll(job);
      aborting = true;
      abort_started = Clock::now();
    }
    if (aborting && Clock::now() - abort_started > std::chrono::seconds(10)) {
      // The engine never ended the aborted streams; give up on them.
      for (Choice& c : job.choices) c.done = true;
      break;
    }
    const auto timeout = job.choices.size() == 1 ? poll : std::chrono::milliseconds(1);
    for (Choice& c : job.choices) {
      if (c.done) continue;
      std::optional<GenerationChunk> chunk = c.stream->Next(timeout);
      if (!chunk) continue;
      const auto now = Clock::now();
      ModelMetrics& mm = job.model->metrics;
      if (!chunk->tokens.empty()) {
        if (!c.got_first) {
          mm.ttft.Observe(std::chrono::duration<double>(now - job.start).count());
          c.got_first = true;
        } else {
          const double gap = std::chrono::duration<double>(now - c.last_token).count();
          for (size_t i = 0; i < chunk->tokens.size(); ++i) {
            mm.itl.Observe(gap / static_cast<double>(chunk->tokens.size()));
          }
        }
        c.last_token = now;
      }
      if (!chunk->error.ok() && !job.error) {
        job.error = FromStatus(chunk->error);
        job.error->http_status = 500;
        if (chunk->finish == FinishReason::kNone) chunk->finish = FinishReason::kAbort;
      }
      ChoiceDelta d = c.out->Push(*chunk);
      if (c.out->tool_calls_complete() && chunk->finish == FinishReason::kNone && !c.ending) {
        job.model->engine->Abort(c.stream->id());  // the one call allowed is complete
        c.ending = true;
      }
      if (chunk->finish != FinishReason::kNone) {
        c.done = true;
        c.final_info = *chunk;
        c.final_info.tokens.clear();
        mm.tool_calls_unknown.fetch_add(c.out->unknown_tool_calls());
        mm.tool_calls_malformed.fetch_add(c.out->malformed_tool_calls());
        mm.e2e.Observe(std::chrono::duration<double>(now - job.start).count());
      }
      if (d.has_text() || d.finish_reason || !d.token_ids.empty()) {
        if (!on_delta(c, d)) {
          job.client_gone = true;
          break;
        }
      }
    }
    if (!job.client_gone && Clock::now() - job.last_write >= poll) {
      if (!heartbeat()) job.client_gone = true;
    }
    if (job.client_gone) {
      AbortAll(job);
      job.model->metrics.aborted_by_client.fetch_add(1);
      MX_LOG_DEBUG("request {}: client went away; aborted", job.id);
      return false;
    }
  }
  return true;
}

Json UsageOf(const Job& job) {
  int64_t prompt = 0, completion = 0, cached = 0, reasoning = 0;
  for (const Choice& c : job.choices) {
    completion += c.out->completion_tokens();
    reasoning += c.out->reasoning_tokens();
    if (c.index % job.req.n == 0) {
      prompt += static_cast<int64_t>(job.prep.prompt_ids[c.prompt_index].size());
      cached += c.final_info.cached_tokens;
    }
  }
  return UsageJson(prompt, completion, cached, reasoning);
}

Json FinishJson(const ChoiceDelta& d) { return d.finish_reason ? Json(*d.finish_reason) : Json(); }

Json MatchedStop(const ChoiceDelta& d) {
  if (!d.matched_stop.empty()) return d.matched_stop;
  if (d.matched_stop_token) return *d.matched_stop_token;
  return nullptr;
}

// ---- chat ----

Json ChatChunk(const Job& job, const Choice& c, Json delta, const ChoiceDelta* d) {
  Json choice;
  choice["index"] = c.index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = (d != nullptr && job.req.logprobs && !d->logprobs.empty())
                           ? ChatLogprobs(job.model->tokenizer, d->logprobs)
                           : Json();
  choice["finish_reason"] = d != nullptr ? FinishJson(*d) : Json();
  if (d != nullptr && d->finish_reason) choice["matched_stop"] = MatchedStop(*d);
  Json j;
  j["id"] = job.id;
  j["object"] = "chat.completion.chunk";
  j["created"] = job.created;
  j["model"] = job.model->name;
  j["choices"] = Json::array({std::move(choice)});
  return j;
}

std::string ChatStreamEvents(const Job& job, Choice& c, const ChoiceDelta& d) {
  std::string out;
  if (!c.sent_first) {
    c.sent_first = true;
    out += SseEvent(ChatChunk(job, c, Json{{"role", "assistant"}, {"content", ""}}, nullptr));
  }
  Json delta = Json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(d.tool_calls, true);
  if (!delta.empty() || d.finish_reason || (job.req.logprobs && !d.logprobs.empty())) {
    out += SseEvent(ChatChunk(job, c, std::move(delta), &d));
  }
  return out;
}

Json ChatResponse(const Job& job) {
  Json choices = Json::array();
  for (const Choice& c : job.choices) {
    const ChoiceDelta& t = c.out->total();
    Json msg;
    msg["role"] = "assistant";
    msg["content"] = (t.content.empty() && !t.tool_calls.empty()) ? Json() : Json(t.content);
    msg["reasoning_content"] = t.reasoning.empty() ? Json() : Json(t.reasoning);
    if (!t.tool_calls.empty()) msg["tool_calls"] = ToolCallsJson(t.tool_calls, false);
    Json ch;
    ch["index"] = c.index;
    ch["message"] = std::move(msg);
    ch["logprobs"] = job.req.logprobs ? ChatLogprobs(job.model->tokenizer, t.logprobs) : Json();
    ch["finish_reason"] = t.finish_reason ? Json(*t.finish_reason) : Json("abort");
    ch["matched_stop"] = MatchedStop(t);
    choices.push_back(std::move(ch));
  }
  Json j;
  j["id"] = job.id;
  j["object"] = "chat.completion";
  j["created"] = job.created;
  j["model"] = job.model->name;
  j["choices"] = std::move(choices);
  j["usage"] = UsageOf(job);
  return j;
}

// ---- completions ----

Json CompletionChoice(Job& job, Choice& c, const std::string& text, const ChoiceDelta& d,
                      bool total) {
  Json ch;
  ch["index"] = c.index;
  ch["text"] = text;
  ch["logprobs"] = job.req.logprobs
                       ? CompletionLogprobs(job.model->tokenizer, d.logprobs, &c.text_offset)
                       : Json();
  ch["finish_reason"] =
      total ? (d.finish_reason ? Json(*d.finish_reason) : Json("abort")) : FinishJson(d);
  if (d.finish_reason) ch["matched_stop"] = MatchedStop(d);
  return ch;
}

Json CompletionObject(const Job& job, Json choices) {
  Json j;
  j["id"] = job.id;
  j["object"] = "text_completion";
  j["created"] = job.created;
  j["model"] = job.model->name;
  j["choices"] = std::move(choices);
  return j;
}

// ---- /generate ----

Json GenerateObject(const Job& job, const Choice& c, const std::string& text,
                    const ChoiceDelta& total) {
  Json meta;
  meta["id"] = job.id;
  if (total.finish_reason) {
    std::string type = *total.finish_reason == "tool_calls" ? "stop" : *total.finish_reason;
    meta["finish_reason"] = Json{{"type", type}, {"matched", MatchedStop(total)}};
  } else {
    meta["finish_reason"] = nullptr;
  }
  meta["prompt_tokens"] = job.prep.prompt_ids[c.prompt_index].size();
  meta["completion_tokens"] = c.out->completion_tokens();
  meta["cached_tokens"] = c.final_info.cached_tokens;
  meta["queue_time"] = c.final_info.queue_seconds;
  meta["ttft"] = c.final_info.ttft_seconds;
  meta["e2e_latency"] = c.final_info.e2e_seconds;
  if (job.req.logprobs) {
    Json lp = Json::array();
    for (const auto& e : total.logprobs) lp.push_back(Json::array({e.logprob, e.token, nullptr}));
    meta["output_token_logprobs"] = std::move(lp);
  }
  Json j;
  j["text"] = text;
  j["output_ids"] = total.token_ids;
  j["meta_info"] = std::move(meta);
  return j;
}

// Ends every engine request of a job and forgets it, however the HTTP request ended.
struct JobCleanup {
  Server::Impl& impl;
  Job& job;
  ~JobCleanup() {
    AbortAll(job);
    impl.UnregisterJob(job.id, &job.active);
  }
};

// The request's body parsed for its API into `job` (request, model, prompt ids).
std::optional<ApiError> ParseJob(ApiKind kind, const std::string& raw, Server::Impl& impl,
                                 Job* job) {
  Json body;
  if (auto e = ParseBody(raw, &body, impl.options.limits.max_json_depth)) return e;
  std::optional<ApiError> err;
  ResponsesContext rctx;
  switch (kind) {
    case ApiKind::kChat:
      err = ParseChatRequest(body, impl.options.limits, &job->req);
      break;
    case ApiKind::kCompletion:
      err = ParseCompletionRequest(body, impl.options.limits, &job->req);
      break;
    case ApiKind::kGenerate:
      err = ParseGenerateRequest(body, impl.options.limits, &job->req);
      break;
    case ApiKind::kMessages:
      err = ParseMessagesRequest(body, impl.options.limits, /*count_tokens=*/false, &job->req);
      break;
    case ApiKind::kResponses:
      err = ParseResponsesRequest(body, impl.options.limits, impl.responses, &job->req, &rctx);
      break;
  }
  if (err) return err;
  if (auto e = impl.FindModel(job->req.model, &job->model)) return e;
  if (job->req.thinking_budget < 0 && !job->req.reasoning_effort.empty()) {
    const EffortBudgets& b = impl.options.effort_budgets;
    const std::string& effort = job->req.reasoning_effort;
    const int32_t budget = effort == "low" ? b.low : effort == "medium" ? b.medium : b.high;
    job->req.thinking_budget = budget > 0 ? budget : -1;  // 0: unbounded
  }
  if (auto e = Prepare(*job->model, job->req, &job->prep)) return e;
  job->id = kind == ApiKind::kChat ? NewResponseId("chatcmpl-") : NewResponseId("cmpl-");
  if (kind == ApiKind::kGenerate && !job->req.request_id.empty()) job->id = job->req.request_id;
  job->created = UnixNow();
  if (kind == ApiKind::kMessages) {
    job->id = NewResponseId("msg_");
    job->api = std::make_unique<AnthropicOutput>(
        job->id, job->model->name, static_cast<int64_t>(job->prep.prompt_ids[0].size()));
  }
  if (kind == ApiKind::kResponses) {
    job->id = NewResponseId("resp_");
    const bool store = rctx.store;
    job->api =
        std::make_unique<ResponsesOutput>(job->id, job->model->name, job->created, std::move(rctx),
                                          store ? &impl.responses : nullptr);
  }
  return std::nullopt;
}

using WriteFn = std::function<bool(const std::string&)>;
using DeltaFn = std::function<bool(Choice&, const ChoiceDelta&)>;

// How a streamed choice's delta becomes SSE events, per API.
DeltaFn StreamDeltas(ApiKind kind, Job& j, HttpExchange& ex, const WriteFn& write) {
  if (kind == ApiKind::kChat) {
    return
        [&j, write](Choice& c, const ChoiceDelta& d) { return write(ChatStreamEvents(j, c, d)); };
  }
  if (kind == ApiKind::kCompletion) {
    return [&j, &ex, write](Choice& c, const ChoiceDelta& d) {
      std::string text = d.content;
      if (!c.sent_first && j.req.echo) text = j.prep.prompt_texts[c.prompt_index] + text;
      c.sent_first = true;
      if (text.empty() && !d.finish_reason && !(j.req.logprobs && !d.logprobs.empty())) {
        return !ex.ClientGone();
      }
      Json choices = Json::array({CompletionChoice(j, c, text, d, false)});
      return write(SseEvent(CompletionObject(j, std::move(choices))));
    };
  }
  return [&j, write](Choice& c, const ChoiceDelta& d) {
    c.cumulative += d.content;
    return write(SseEvent(GenerateObject(j, c, c.cumulative, c.out->total())));
  };
}

// What a stream sends after its last delta: an error event, the usage chunk when asked for,
// and the `[DONE]` terminator.
std::string StreamTail(ApiKind kind, const Job& j) {
  std::string tail;
  if (j.error) tail += SseEvent(j.error->ToJson());
  if (j.req.include_usage && kind != ApiKind::kGenerate) {
    Json u = kind == ApiKind::kChat ? Json{{"id", j.id},
                                           {"object", "chat.completion.chunk"},
                                           {"created", j.created},
                                           {"model", j.model->name}}
                                    : CompletionObject(j, Json::array());
    u["choices"] = Json::array();
    u["usage"] = UsageOf(j);
    tail += SseEvent(u);
  }
  return tail + kSseDone;
}

// The whole answer of a request that did not stream.
void SendFinal(ApiKind kind, Job& j, HttpExchange& ex) {
  if (j.error) return SendError(ex, *j.error);
  if (kind == ApiKind::kChat) return SendJson(ex, ChatResponse(j));
  if (kind == ApiKind::kCompletion) {
    Json choices = Json::array();
    for (Choice& c : j.choices) {
      c.text_offset = 0;
      std::string text = c.out->total().content;
      if (j.req.echo) text = j.prep.prompt_texts[c.prompt_index] + text;
      choices.push_back(CompletionChoice(j, c, text, c.out->total(), true));
    }
    Json obj = CompletionObject(j, std::move(choices));
    obj["usage"] = UsageOf(j);
    return SendJson(ex, obj);
  }
  const Choice& c = j.choices[0];
  SendJson(ex, GenerateObject(j, c, c.out->total().content, c.out->total()));
}

GenerationResult ResultOf(const Job& j) {
  const Choice& c = j.choices[0];
  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(j.prep.prompt_ids[0].size());
  r.completion_tokens = c.out->completion_tokens();
  r.cached_tokens = c.final_info.cached_tokens;
  r.reasoning_tokens = c.out->reasoning_tokens();
  r.total = &c.out->total();
  r.error = j.error;
  return r;
}

}  // namespace

void Server::Impl::HandleGeneration(ApiKind kind, HttpExchange& ex) {
  const ErrorShape shape = ShapeForPath(ex.request().path);
  if (!ready.load()) {
    return SendError(ex, FromStatus(Status(StatusCode::kUnavailable, "the model is loading")),
                     shape);
  }
  if (draining.load()) {
    return SendError(
        ex, FromStatus(Status(StatusCode::kUnavailable, "the server is shutting down")), shape);
  }
  metrics.CountRoute(ex.request().path);
  Job job;
  job.start = Clock::now();
  if (auto e = ParseJob(kind, ex.request().body, *this, &job)) return SendError(ex, *e, shape);
  // Registered before submitting, so that the id is unique among running requests and an
  // abort_all that comes meanwhile is seen (SubmitAll adds ids under jobs_mu).
  if (!RegisterJob(job.id, &job.active)) {
    return SendError(ex, BadRequest("rid", fmt::format("a request with rid '{}' is already "
                                                       "running",
                                                       job.id)));
  }
  JobCleanup cleanup{*this, job};
  if (auto e = SubmitAll(job, jobs_mu, options)) return SendError(ex, *e, shape);

  WriteFn write = [&](const std::string& s) {
    if (s.empty()) return !ex.ClientGone();
    job.last_write = Clock::now();
    return ex.Write(s);
  };
  DeltaFn on_delta;
  std::function<bool()> heartbeat;
  if (!job.req.stream) {
    // note: nothing is sent before the result exists, so that a later error keeps its status
    // and a client's own timeout can fire; the socket is watched for a hang-up meanwhile.
    on_delta = [&job](Choice&, const ChoiceDelta& d) {
      if (job.api) job.api->Delta(d);  // the same blocks a stream would send
      return true;
    };
    heartbeat = [&] {
      job.last_write = Clock::now();
      return !ex.ClientGone();
    };
  } else {
    if (!ex.BeginStream(200, "text/event-stream",
                        {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}})) {
      return;
    }
    if (job.api && !write(job.api->StreamStart())) return;
    // A keep-alive (an SSE comment, or the API's own event) whenever the stream has been quiet
    // for sse_keepalive, so that neither a proxy nor the client's idle timeout ends a stream
    // waiting on a long prefill.
    heartbeat = [&] {
      if (ex.ClientGone()) return false;
      if (Clock::now() - job.last_write < options.sse_keepalive) return true;
      job.model->metrics.keepalives.fetch_add(1);
      return write(job.api ? job.api->Heartbeat() : std::string(": keep-alive\n\n"));
    };
    if (job.api) {
      on_delta = [&job, write](Choice&, const ChoiceDelta& d) { return write(job.api->Delta(d)); };
    } else {
      on_delta = StreamDeltas(kind, job, ex, write);
    }
  }
  if (!Pump(*this, job, on_delta, heartbeat)) return;  // the client is gone; nothing to answer
  if (job.api) {
    const GenerationResult r = ResultOf(job);
    job.api->Finish(r);
    if (job.req.stream) {
      if (write(job.api->StreamEnd(r))) ex.End();
    } else if (job.error) {
      SendError(ex, *job.error, shape);
    } else {
      SendJson(ex, job.api->Final(r));
    }
    return;
  }
  if (!job.req.stream) return SendFinal(kind, job, ex);
  if (write(StreamTail(kind, job))) ex.End();
}

bool Server::Impl::HealthGenerate(std::string* why) {
  for (const auto& m : models) {
    GenerationRequest g;
    g.prompt = m->tokenizer.Encode("1");
    if (g.prompt.empty()) g.prompt = {0};
    g.max_tokens = 1;
    g.sampling.temperature = 0;
    g.ignore_eos = true;
    auto s = m->engine->Submit(std::move(g));
    if (!s.ok()) {
      *why = m->name + ": " + s.status().message();
      return false;
    }
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (true) {
      auto c = (*s)->Next(std::chrono::milliseconds(100));
      if (c && !c->error.ok()) {
        *why = m->name + ": " + c->error.message();
        return false;
      }
      if (c && c->finish != FinishReason::kNone) break;
      if (Clock::now() > deadline) {
        m->engine->Abort((*s)->id());
        *why = m->name + ": no token within 20 s";
        return false;
      }
    }
  }
  return true;
}

}  // namespace mx::server
