// The Engine: a thread-safe front (submit / abort / stats / flush / shutdown) over the
// Scheduler, driven by one engine loop thread; per-request streams are mutex + condvar queues.
#include "engine/engine.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <thread>

#include "base/log.h"
#include "base/meminfo.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "engine/engine_factory.h"
#include "engine/memory_plan.h"
#include "engine/model_factory.h"
#include "engine/scheduler.h"
#include "model/moe.h"
#include "parallel/communicator.h"

namespace mx {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "";
}

void AddReplicaStats(const EngineStats& replica, EngineStats* total) {
  const EngineGauges& g = replica.gauges;
  EngineGauges& tg = total->gauges;
  tg.running += g.running;
  tg.queued += g.queued;
  tg.kv_pages_used += g.kv_pages_used;
  tg.kv_pages_total += g.kv_pages_total;
  tg.kv_page_size = g.kv_page_size;
  const EngineCounters& c = replica.counters;
  EngineCounters& tc = total->counters;
  tc.prompt_tokens_total += c.prompt_tokens_total;
  tc.generation_tokens_total += c.generation_tokens_total;
  tc.cached_prompt_tokens_total += c.cached_prompt_tokens_total;
  tc.radix_lookups += c.radix_lookups;
  tc.radix_hit_tokens += c.radix_hit_tokens;
  tc.requests_finished += c.requests_finished;
  tc.requests_aborted += c.requests_aborted;
  tc.requests_rejected += c.requests_rejected;
  tc.retractions += c.retractions;
  tc.forward_seconds += c.forward_seconds;
  const SpeculativeStats& s = replica.spec;
  SpeculativeStats& t = total->spec;
  t.mtp_seconds += s.mtp_seconds;
  t.mtp_rows += s.mtp_rows;
  // The mean accept length over all verify steps (weighted by each replica's steps).
  const int64_t steps = t.verify_steps + s.verify_steps;
  if (steps > 0) {
    t.accept_length_mean = (t.accept_length_mean * static_cast<double>(t.verify_steps) +
                            s.accept_length_mean * static_cast<double>(s.verify_steps)) /
                           static_cast<double>(steps);
  }
  t.verify_steps = steps;
  t.drafts_proposed += s.drafts_proposed;
  t.tokens_accepted += s.tokens_accepted;
  auto add = [](const std::vector<int64_t>& from, std::vector<int64_t>* to) {
    if (to->size() < from.size()) to->resize(from.size(), 0);
    for (size_t i = 0; i < from.size(); ++i) (*to)[i] += from[i];
  };
  add(s.proposed_at, &t.proposed_at);
  add(s.accepted_at, &t.accepted_at);
  add(s.steps_histogram, &t.steps_histogram);
  // auto: each replica chooses for its own batch; the group shows the first replica's choice.
  if (t.steps_histogram.size() == s.steps_histogram.size() && !t.automatic) {
    t.automatic = s.automatic;
    t.steps_chosen = s.steps_chosen;
    t.probe = s.probe;
    t.estimate_tokens_per_s = s.estimate_tokens_per_s;
    t.estimate_off_tokens_per_s = s.estimate_off_tokens_per_s;
    t.estimate_accept_length = s.estimate_accept_length;
  }
}

Result<SchedulePolicy> ParseSchedulePolicy(std::string_view name) {
  for (SchedulePolicy p : {SchedulePolicy::kFcfs, SchedulePolicy::kLpm}) {
    if (name == SchedulePolicyName(p)) return p;
  }
  return InvalidArgument("schedule_policy '{}': expected fcfs or lpm", name);
}

const char* SchedulePolicyName(SchedulePolicy p) {
  return p == SchedulePolicy::kLpm ? "lpm" : "fcfs";
}

Result<SpeculativeAlgorithm> ParseSpeculativeAlgorithm(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  if (up.empty()) return SpeculativeAlgorithm::kNone;
  if (up == "MTP" || up == "EAGLE" || up == "NEXTN") return SpeculativeAlgorithm::kMtp;
  return InvalidArgument("speculative_algorithm '{}': expected MTP (aliases EAGLE, NEXTN)", name);
}

namespace {

class Channel final : public ChunkSink {
 public:
  void Push(GenerationChunk chunk) override {
    {
      MutexLock l(mu_);
      q_.push_back(std::move(chunk));
    }
    cv_.NotifyAll();
  }
  std::optional<GenerationChunk> Pop(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock l(mu_);
    while (q_.empty() && cv_.WaitUntil(l, deadline)) {
    }
    if (q_.empty()) return std::nullopt;
    GenerationChunk c = std::move(q_.front());
    q_.pop_front();
    return c;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<GenerationChunk> q_ GUARDED_BY(mu_);
};

class Stream final : public RequestStream {
 public:
  Stream(RequestId id, std::shared_ptr<Channel> ch) : id_(id), ch_(std::move(ch)) {}
  RequestId id() const override { return id_; }
  std::optional<GenerationChunk> Next(std::chrono::milliseconds timeout) override {
    if (last_) return *last_;
    auto c = ch_->Pop(timeout);
    if (c && c->finish != FinishReason::kNone) {
      last_ = GenerationChunk();
      last_->finish = c->finish;
      last_->error = c->error;
    }
    return c;
  }

 private:
  RequestId id_;
  std::shared_ptr<Channel> ch_;
  std::optional<GenerationChunk> last_;  // the end, repeated after the final chunk
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineOptions& o, std::unique_ptr<ModelRunner> runner,
             std::optional<tok::Tokenizer> tokenizer, SchedulerConfig cfg)
      : opts_(o),
        runner_(std::move(runner)),
        tokenizer_(std::move(tokenizer)),
        context_(cfg.context_window),
        vocab_(runner_->config().vocab_size),
        sched_(std::make_unique<Scheduler>(std::move(cfg), *runner_,
                                           tokenizer_ ? &*tokenizer_ : nullptr)) {
    published_ = sched_->stats();
    // Before any request ends with the error, so a client that sees it finds Submit refused.
    // Requests already in the inbox reach the failed scheduler and end at once.
    sched_->set_on_failure([this](const Status& error) {
      MX_LOG_ERROR("engine failed: {}; every request ends with the error, new ones are refused",
                   error.ToString());
      MutexLock l(mu_);
      health_ = Status(StatusCode::kUnavailable, "engine failed: " + error.message());
    });
    thread_ = std::thread([this] { Loop(); });
  }
  ~EngineImpl() override { Shutdown(std::chrono::milliseconds(0)); }

  Result<std::unique_ptr<RequestStream>> Submit(GenerationRequest r) override {
    if (r.prompt.empty()) return InvalidArgument("the prompt is empty");
    for (int32_t t : r.prompt) {
      if (t < 0 || t >= vocab_)
        return InvalidArgument("prompt token id {} is outside [0, {})", t, vocab_);
    }
    if (r.max_tokens < 1) return InvalidArgument("max_tokens must be >= 1, got {}", r.max_tokens);
    if (r.min_tokens < 0 || r.min_tokens > r.max_tokens) {
      return InvalidArgument("min_tokens {} must be in [0, max_tokens = {}]", r.min_tokens,
                             r.max_tokens);
    }
    const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
    if (total > context_) {
      return InvalidArgument("prompt ({} tokens) + max_tokens ({}) exceeds the context window ({})",
                             r.prompt.size(), r.max_tokens, context_);
    }
    if (sched_->PagesFor(total) > published_total_pages()) {
      return InvalidArgument(
          "prompt ({} tokens) + max_tokens ({}) needs more KV than the whole pool ({} tokens)",
          r.prompt.size(), r.max_tokens, published_total_pages() * opts_.page_size);
    }
    if (r.sampling.temperature < 0 || r.sampling.top_p <= 0 || r.sampling.top_p > 1 ||
        r.sampling.min_p < 0 || r.sampling.min_p > 1 || r.sampling.top_k < 0) {
      return InvalidArgument("sampling parameters out of range");
    }
    if (r.top_logprobs > kMaxTopLogprobs) {
      return InvalidArgument("top_logprobs must be <= {}", kMaxTopLogprobs);
    }
    MutexLock l(mu_);
    if (!health_.ok()) return health_;
    if (stopping_) return Status(StatusCode::kUnavailable, "the engine is shutting down");
    if (static_cast<int64_t>(inbox_.size()) + queued_ >= opts_.max_queued_requests) {
      ++rejected_;
      return ResourceExhausted("the request queue is full ({} requests waiting)",
                               opts_.max_queued_requests);
    }
    const RequestId id = next_id_++;
    auto ch = std::make_shared<Channel>();
    inbox_.push_back({id, std::move(r), ch, Clock::now()});
    cv_.NotifyAll();
    return std::unique_ptr<RequestStream>(std::make_unique<Stream>(id, ch));
  }

  void Abort(RequestId id) override {
    MutexLock l(mu_);
    aborts_.push_back(id);
    cv_.NotifyAll();
  }

  EngineStats Stats() const override {
    MutexLock l(mu_);
    EngineStats s = published_;
    s.gauges.queued += static_cast<int64_t>(inbox_.size());
    s.counters.requests_rejected = rejected_;
    return s;
  }

  void FlushCache() override {
    MutexLock l(mu_);
    flush_ = true;
    cv_.NotifyAll();
  }

  void Shutdown(std::chrono::milliseconds drain_timeout) override {
    {
      MutexLock l(mu_);
      if (!stopping_) {
        stopping_ = true;
        deadline_ = Clock::now() + drain_timeout;
      }
      cv_.NotifyAll();
    }
    MutexLock j(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

  Status Health() const override {
    MutexLock l(mu_);
    return health_;
  }

  int64_t context_window() const override { return context_; }
  int64_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> eos_ids() const override { return sched_->eos_ids(); }
  KernelTuningInfo kernel_tuning() const override {
    KernelTuningInfo k;
    if (const MoeTuning* m = runner_->moe_tuning(); m != nullptr && m->has_moe) {
      k.state = m->state();
      k.config = m->file;
      k.shape = m->dtype + " " + MoeShapeSpec(m->shape);
      k.tune_command = m->command;
    }
    return k;
  }

 private:
  struct Incoming {
    RequestId id;
    GenerationRequest req;
    std::shared_ptr<Channel> ch;
    Clock::time_point submitted;
  };

  int64_t published_total_pages() const { return total_pages_; }

  void Loop() {
    while (true) {
      std::vector<Incoming> in;
      std::vector<RequestId> aborts;
      bool flush = false, stopping = false;
      Clock::time_point deadline;
      {
        MutexLock l(mu_);
        while (inbox_.empty() && aborts_.empty() && !flush_ && !stopping_ && sched_->idle()) {
          cv_.Wait(l);
        }
        in.swap(inbox_);
        aborts.swap(aborts_);
        std::swap(flush, flush_);
        stopping = stopping_;
        deadline = deadline_;
        queued_ += static_cast<int64_t>(in.size());
      }
      for (auto& r : in) sched_->Add(r.id, std::move(r.req), std::move(r.ch), r.submitted);
      for (RequestId id : aborts) sched_->Abort(id);
      if (flush) {
        const int64_t n = sched_->FlushCache();
        MX_LOG_INFO("radix cache flushed: {} pages freed", n);
      }
      bool done = false;
      if (stopping && (sched_->idle() || Clock::now() >= deadline)) {
        sched_->AbortAll(Status(StatusCode::kUnavailable, "the engine shut down"));
        done = true;
      } else {
        sched_->Step();
      }
      {
        MutexLock l(mu_);
        published_ = sched_->stats();
        queued_ = published_.gauges.queued;
      }
      if (done) return;
    }
  }

  EngineOptions opts_;
  std::unique_ptr<ModelRunner> runner_;
  std::optional<tok::Tokenizer> tokenizer_;
  int64_t context_;
  int64_t vocab_;
  std::unique_ptr<Scheduler> sched_;  // the loop thread's
  int64_t total_pages_ = 0;

 public:
  void set_total_pages(int64_t n) { total_pages_ = n; }

 private:
  // What the submitting threads and the loop thread share.
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Incoming> inbox_ GUARDED_BY(mu_);
  std::vector<RequestId> aborts_ GUARDED_BY(mu_);
  bool flush_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  Clock::time_point deadline_ GUARDED_BY(mu_);
  // Health(): set once, by the loop thread, when the scheduler fails.
  Status health_ GUARDED_BY(mu_);
  RequestId next_id_ GUARDED_BY(mu_) = 1;
  int64_t queued_ GUARDED_BY(mu_) = 0;
  int64_t rejected_ GUARDED_BY(mu_) = 0;
  EngineStats published_ GUARDED_BY(mu_);
  Mutex join_mu_;  // one Shutdown joins the loop thread; the others wait for it
  std::thread thread_ GUARDED_BY(join_mu_);
};

}  // namespace

struct SpeculativeSetting {
  int32_t steps = 0;  // the most drafts (0: off)
  bool automatic = false;
};

static Result<SpeculativeSetting> SpeculativeSteps(const SpeculativeOptions& o,
                                                   const ModelConfig& c) {
  if (o.algorithm == SpeculativeAlgorithm::kNone) {
    if (o.num_steps.has_value() || o.num_draft_tokens != 0) {
      return InvalidArgument(
          "speculative_num_steps / speculative_num_draft_tokens need speculative_algorithm MTP "
          "(or its aliases EAGLE, NEXTN)");
    }
    return SpeculativeSetting{};
  }
  if (c.num_nextn_predict_layers < 1) {
    return InvalidArgument(
        "speculative_algorithm MTP: the model has no MTP layer (num_nextn_predict_layers = 0)");
  }
  if (o.eagle_topk != 1) {
    return InvalidArgument(
        "speculative_eagle_topk {}: only 1 (a draft chain) is supported; draft trees (topk > 1) "
        "are not",
        o.eagle_topk);
  }
  if (!o.num_steps.has_value()) {
    const int32_t n = o.num_draft_tokens;
    if (n != 0 && (n < 2 || n > 17)) {
      return InvalidArgument(
          "speculative_num_draft_tokens {} with speculative_num_steps auto: the most tokens per "
          "verify must be in [2, 17]",
          n);
    }
    return SpeculativeSetting{n == 0 ? kSpeculativeAutoMaxSteps : n - 1, true};
  }
  const int32_t steps = *o.num_steps;
  if (steps < 1 || steps > 16) {
    return InvalidArgument("speculative_num_steps must be auto or in [1, 16], got {}", steps);
  }
  if (o.num_draft_tokens != 0 && o.num_draft_tokens != steps + 1) {
    return InvalidArgument(
        "speculative_num_draft_tokens {} with speculative_num_steps {} and topk 1: a chain "
        "verifies num_steps + 1 = {} tokens",
        o.num_draft_tokens, steps, steps + 1);
  }
  return SpeculativeSetting{steps, false};
}

Result<std::unique_ptr<Engine>> CreateEngineWithRunner(const EngineOptions& o,
                                                       std::unique_ptr<ModelRunner> runner,
                                                       std::optional<tok::Tokenizer> tokenizer,
                                                       std::vector<int32_t> eos_ids,
                                                       std::vector<float> kv_scales) {
  if (o.page_size < 1) return InvalidArgument("page_size must be >= 1, got {}", o.page_size);
  if (o.chunked_prefill_size < 1) {
    return InvalidArgument("chunked_prefill_size must be >= 1, got {}", o.chunked_prefill_size);
  }
  if (!(o.max_decode_gap_ms >= 0.0) || !std::isfinite(o.max_decode_gap_ms)) {
    return InvalidArgument("max_decode_gap_ms must be >= 0, got {}", o.max_decode_gap_ms);
  }
  if (o.max_running_requests < 1) {
    return InvalidArgument("max_running_requests must be >= 1, got {}", o.max_running_requests);
  }
  const KvCacheDtype dtype = o.kv_cache_dtype;
  const ModelConfig& c = runner->config();
  MX_ASSIGN_OR_RETURN(SpeculativeSetting spec, SpeculativeSteps(o.speculative, c));
  const int32_t spec_steps = spec.steps;
  const int64_t n_layers = c.num_hidden_layers + (c.num_nextn_predict_layers > 0 ? 1 : 0);
  if (!kv_scales.empty() && static_cast<int64_t>(kv_scales.size()) != n_layers) {
    return InvalidArgument("{} KV scales for {} layers", kv_scales.size(), n_layers);
  }
  if ((dtype == KvCacheDtype::kFp8E4M3Fn || dtype == KvCacheDtype::kFp8E4M3Fnuz) &&
      kv_scales.empty()) {
    MX_LOG_WARN("kv_cache_dtype {}: the checkpoint has no KV scales; using 1.0 for every layer",
                KvCacheDtypeName(dtype));
  } else if (dtype == KvCacheDtype::kFp8E4M3Fn || dtype == KvCacheDtype::kFp8E4M3Fnuz) {
    MX_LOG_INFO("kv_cache_dtype {}: per-layer KV scales from the checkpoint, {} to {}",
                KvCacheDtypeName(dtype), *std::min_element(kv_scales.begin(), kv_scales.end()),
                *std::max_element(kv_scales.begin(), kv_scales.end()));
  }
  const int64_t bpt = PagedKvStore::BytesPerToken(c, dtype);
  int64_t tokens = o.max_total_tokens;
  if (tokens <= 0) {
    // Without /proc/meminfo: as if 8 GiB were free.
    const int64_t avail = AvailableMemoryBytes().value_or(int64_t{8} << 30);
    // More than every running request at full context is never used.
    tokens = AutoKvTokens(o.mem_fraction, avail, bpt,
                          int64_t{o.max_running_requests} * c.max_position_embeddings);
  }
  const int64_t n_pages = std::max<int64_t>(1, tokens / o.page_size);
  MX_LOG_INFO("KV cache: {} pages of {} tokens = {} tokens, {} bytes per token ({}), {:.1f} MiB",
              n_pages, o.page_size, n_pages * o.page_size, bpt, KvCacheDtypeName(dtype),
              static_cast<double>(n_pages * o.page_size * bpt) / (1 << 20));
  SchedulerConfig sc;
  sc.page_size = o.page_size;
  sc.n_pages = n_pages;
  sc.kv_dtype = dtype;
  sc.kv_scales = std::move(kv_scales);
  sc.max_running_requests = o.max_running_requests;
  sc.chunked_prefill_size = o.chunked_prefill_size;
  sc.max_decode_gap_s = o.max_decode_gap_ms / 1e3;
  sc.lpm = o.schedule_policy == SchedulePolicy::kLpm;
  sc.disable_radix_cache = o.disable_radix_cache;
  sc.eos_ids = std::move(eos_ids);
  sc.context_window = c.max_position_embeddings;
  sc.overlap_masks = o.overlap_masks.value_or(
      (o.threads > 0 ? o.threads : ThreadPool::HardwareThreads()) < ThreadPool::HardwareThreads());
  sc.spec_steps = spec_steps;
  sc.spec_auto = spec.automatic;
  sc.spec_share_topk = c.index_share_for_mtp_iteration;
  if (spec_steps > 0) {
    MX_LOG_INFO(
        "speculative decoding: MTP, {} draft steps, topk 1, {} draft tokens{}",
        spec.automatic ? fmt::format("auto 0..{}", spec_steps) : fmt::to_string(spec_steps),
        spec.automatic ? fmt::format("up to {}", spec_steps + 1) : fmt::to_string(spec_steps + 1),
        sc.spec_share_topk ? " (draft steps reuse the first step's indexer top-k)" : "");
  }
  auto e = std::make_unique<EngineImpl>(o, std::move(runner), std::move(tokenizer), std::move(sc));
  e->set_total_pages(n_pages);
  return std::unique_ptr<Engine>(std::move(e));
}

Result<std::unique_ptr<Engine>> CreateEngine(const EngineOptions& o) {
  if (o.tp < 1) return InvalidArgument("--tp must be >= 1, got {}", o.tp);
  if (o.tp_comm != nullptr && (o.tp_comm->size() != o.tp || o.tp_comm->rank() != 0)) {
    return InvalidArgument("--tp {}: this process is rank {} of {}", o.tp, o.tp_comm->rank(),
                           o.tp_comm->size());
  }
  // Rank 0's shard (the whole model without parallelism); the factory loads the other
  // in-process ranks.
  ModelLoadOptions lo = o.model;
  lo.shard = ModelShard{0, o.tp, o.expert_parallel && o.tp > 1};
  MX_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(lo));
  std::vector<float> kv_scales = loaded.model->kv_scales();
  MX_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                      MakeModelRunner(loaded, o.threads, o.tp_comm));
  EngineOptions eo = o;
  // Every in-process rank keeps a whole copy of the MLA cache.
  if (o.tp > 1 && o.tp_comm == nullptr) eo.mem_fraction /= o.tp;
  if (o.tp > 1) {
    MX_LOG_INFO("{} parallel over {} ranks ({})", o.expert_parallel ? "expert" : "tensor", o.tp,
                o.tp_comm != nullptr ? "MPI" : "threads of this process");
  }
  return CreateEngineWithRunner(eo, std::move(runner), std::move(loaded.tokenizer),
                                std::move(loaded.eos_ids), std::move(kv_scales));
}

}  // namespace mx
