// The data-parallel group: routing, request-id mapping, per-replica in-flight accounting, and
// the memory check at load.
#include "engine/dp_engine.h"

#include <filesystem>
#include <map>
#include <thread>

#include "base/check.h"
#include "base/log.h"
#include "base/meminfo.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "io/model_config.h"
#include "kv/paged_kv_store.h"

namespace mx {

namespace {

// What the streams and the group share, so a stream may outlive the group object.
struct Book {
  Mutex mu;
  struct Owner {
    int replica;
    RequestId local;
  };
  std::map<RequestId, Owner> owners GUARDED_BY(mu);  // unfinished requests by group id
  std::vector<int64_t> inflight GUARDED_BY(mu);      // per replica: unfinished requests
  std::vector<int64_t> routed GUARDED_BY(mu);        // per replica: requests ever sent

  void Release(RequestId id) EXCLUDES(mu) {
    MutexLock l(mu);
    auto it = owners.find(id);
    if (it == owners.end()) return;
    --inflight[it->second.replica];
    owners.erase(it);
  }
};

class DpStream final : public RequestStream {
 public:
  DpStream(RequestId id, std::shared_ptr<Book> book, std::unique_ptr<RequestStream> inner)
      : id_(id), book_(std::move(book)), inner_(std::move(inner)) {}
  ~DpStream() override {
    if (!done_) book_->Release(id_);
  }
  RequestId id() const override { return id_; }
  std::optional<GenerationChunk> Next(std::chrono::milliseconds timeout) override {
    auto c = inner_->Next(timeout);
    if (c && c->finish != FinishReason::kNone && !done_) {
      done_ = true;
      book_->Release(id_);
    }
    return c;
  }

 private:
  RequestId id_;
  std::shared_ptr<Book> book_;
  std::unique_ptr<RequestStream> inner_;
  bool done_ = false;
};

// Unavailable: `what`, then "replica i: <why>" for each replica with a non-ok `why`.
Status ReplicasUnavailable(const char* what, const std::vector<Status>& why) {
  std::string msg = what;
  const char* sep = ": ";
  for (size_t r = 0; r < why.size(); ++r) {
    if (why[r].ok()) continue;
    msg += fmt::format("{}replica {}: {}", sep, r, why[r].message());
    sep = "; ";
  }
  return Status(StatusCode::kUnavailable, std::move(msg));
}

class DpEngine final : public Engine {
 public:
  DpEngine(std::vector<std::unique_ptr<Engine>> replicas, DpRouterOptions opts)
      : replicas_(std::move(replicas)),
        router_(static_cast<int>(replicas_.size()), opts),
        book_(std::make_shared<Book>()) {
    MX_CHECK(!replicas_.empty());
    MutexLock b(book_->mu);
    book_->inflight.assign(replicas_.size(), 0);
    book_->routed.assign(replicas_.size(), 0);
  }
  ~DpEngine() override { Shutdown(std::chrono::milliseconds(0)); }

  Result<std::unique_ptr<RequestStream>> Submit(GenerationRequest request) override {
    // One lock over route + submit keeps the loads the router sees exact under concurrency
    // (a replica's Submit only validates and enqueues).
    MutexLock l(route_mu_);
    std::vector<int64_t> loads;
    {
      MutexLock b(book_->mu);
      loads = book_->inflight;
    }
    // A failed replica is out of rotation: it counts as tried, and the router's choice falls
    // to the least loaded replica not tried yet, as for a full one.
    std::vector<Status> refused(replicas_.size());  // why each tried replica took nothing
    std::vector<bool> tried(replicas_.size(), false);
    for (size_t k = 0; k < replicas_.size(); ++k) {
      refused[k] = replicas_[k]->Health();
      tried[k] = !refused[k].ok();
    }
    auto next_untried = [&] {
      int next = -1;
      for (size_t k = 0; k < replicas_.size(); ++k) {
        if (!tried[k] && (next < 0 || loads[k] < loads[next])) next = static_cast<int>(k);
      }
      return next;
    };
    int r = router_.Route(request.prompt, loads).replica;
    if (tried[r]) r = next_untried();
    const std::vector<int32_t> prompt = request.prompt;
    while (r >= 0) {
      tried[r] = true;
      auto s = replicas_[r]->Submit(request);
      if (s.ok()) {
        router_.Record(prompt, r);
        MutexLock b(book_->mu);
        const RequestId id = next_id_++;
        book_->owners[id] = {r, (*s)->id()};
        ++book_->inflight[r];
        ++book_->routed[r];
        return std::unique_ptr<RequestStream>(std::make_unique<DpStream>(id, book_, std::move(*s)));
      }
      // Full, or failed since its health was read: the next one; any other error is the
      // request's own.
      const StatusCode code = s.status().code();
      if (code != StatusCode::kResourceExhausted && code != StatusCode::kUnavailable) {
        return s.status();
      }
      refused[r] = s.status();
      r = next_untried();
    }
    for (const Status& why : refused) {
      if (why.code() == StatusCode::kResourceExhausted) return why;  // 429: worth a retry
    }
    return ReplicasUnavailable("no data-parallel replica takes requests", refused);
  }

  void Abort(RequestId id) override {
    int replica = -1;
    RequestId local = 0;
    {
      MutexLock b(book_->mu);
      auto it = book_->owners.find(id);
      if (it == book_->owners.end()) return;
      replica = it->second.replica;
      local = it->second.local;
    }
    replicas_[replica]->Abort(local);
  }

  EngineStats Stats() const override {
    EngineStats total;
    std::vector<EngineStats> each;
    for (const auto& e : replicas_) {
      each.push_back(e->Stats());
      AddReplicaStats(each.back(), &total);
    }
    std::vector<bool> healthy;
    for (const auto& e : replicas_) healthy.push_back(e->Health().ok());
    MutexLock b(book_->mu);
    for (size_t r = 0; r < each.size(); ++r) {
      total.dp_replicas.push_back({each[r].gauges.running, each[r].gauges.queued,
                                   each[r].gauges.kv_pages_used, each[r].gauges.kv_pages_total,
                                   book_->routed[r], healthy[r]});
    }
    return total;
  }

  void FlushCache() override {
    {
      MutexLock l(route_mu_);
      router_.Clear();
    }
    for (auto& e : replicas_) e->FlushCache();
  }

  void Shutdown(std::chrono::milliseconds drain_timeout) override {
    // In parallel, so the drain takes drain_timeout, not M times it.
    std::vector<std::thread> t;
    for (auto& e : replicas_) t.emplace_back([&e, drain_timeout] { e->Shutdown(drain_timeout); });
    for (auto& th : t) th.join();
  }

  Status Health() const override {
    std::vector<Status> each;
    for (const auto& e : replicas_) {
      each.push_back(e->Health());
      if (each.back().ok()) return Status::Ok();
    }
    return ReplicasUnavailable("every data-parallel replica has failed", each);
  }

  int64_t context_window() const override { return replicas_[0]->context_window(); }
  int64_t vocab_size() const override { return replicas_[0]->vocab_size(); }
  std::vector<int32_t> eos_ids() const override { return replicas_[0]->eos_ids(); }

 private:
  std::vector<std::unique_ptr<Engine>> replicas_;
  Mutex route_mu_;
  DpRouter router_ GUARDED_BY(route_mu_);
  std::shared_ptr<Book> book_;
  RequestId next_id_ GUARDED_BY(book_->mu) = 1;
};

int64_t WeightBytes(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.path().extension() == ".safetensors") bytes += static_cast<int64_t>(f.file_size(ec));
  }
  return bytes;
}

}  // namespace

std::unique_ptr<Engine> MakeDpEngine(std::vector<std::unique_ptr<Engine>> replicas,
                                     DpRouterOptions router) {
  return std::make_unique<DpEngine>(std::move(replicas), router);
}

Result<std::unique_ptr<Engine>> CreateDpEngine(const EngineOptions& options, int dp_size,
                                               DpRouterOptions router) {
  if (dp_size < 1) return InvalidArgument("--dp must be >= 1, got {}", dp_size);
  if (dp_size == 1) return CreateEngine(options);
  // Memory: every replica holds its own KV pool and, as an upper bound, its own copy of the
  // weights (repacked MXFP4 weights are per replica; mmapped bf16 ones share the page cache).
  const int64_t weights = WeightBytes(options.model.model_dir);
  int64_t kv = 0;
  if (options.max_total_tokens > 0) {
    MX_ASSIGN_OR_RETURN(
        ModelConfig c,
        LoadModelConfig((std::filesystem::path(options.model.model_dir) / "config.json").string()));
    kv = options.max_total_tokens * PagedKvStore::BytesPerToken(c, options.kv_cache_dtype);
  }
  const int64_t avail = AvailableMemoryBytes().value_or(-1);  // unknown: no check
  const double need = static_cast<double>(dp_size) * static_cast<double>(weights + kv);
  if (avail > 0 && need > static_cast<double>(avail)) {
    return ResourceExhausted(
        "--dp {}: {} replicas need about {:.2f} GiB ({} x ({:.1f} MiB weights + {:.1f} MiB KV)) "
        "but {:.2f} GiB of memory is available; use a smaller --dp (or --max-total-tokens)",
        dp_size, dp_size, need / (1 << 30), dp_size, static_cast<double>(weights) / (1 << 20),
        static_cast<double>(kv) / (1 << 20), static_cast<double>(avail) / (1 << 30));
  }
  const int total_threads = options.threads > 0 ? options.threads : ThreadPool::HardwareThreads();
  if (total_threads < dp_size) {
    MX_LOG_WARN("--dp {} with {} threads: every replica gets 1 thread and they share cores",
                dp_size, total_threads);
  }
  std::vector<std::unique_ptr<Engine>> replicas;
  EngineOptions o = options;
  if (o.max_total_tokens <= 0) o.mem_fraction = options.mem_fraction / dp_size;
  // The replicas' forwards together fill total_threads cores.
  o.overlap_masks = options.overlap_masks.value_or(total_threads < ThreadPool::HardwareThreads());
  for (int r = 0; r < dp_size; ++r) {
    o.threads = std::max(1, total_threads / dp_size + (r < total_threads % dp_size ? 1 : 0));
    o.model.log_moe_tuning = r == 0;
    auto e = CreateEngine(o);
    if (!e.ok()) {
      return e.status().WithContext(fmt::format("--dp {}: replica {}", dp_size, r));
    }
    if (r == 0 && o.max_total_tokens <= 0) {
      // Later replicas get the same pool as the first, whatever it left free.
      const EngineStats s = (*e)->Stats();
      o.max_total_tokens = s.gauges.kv_pages_total * s.gauges.kv_page_size;
    }
    replicas.push_back(std::move(*e));
  }
  const EngineStats s = replicas[0]->Stats();
  router.max_tree_tokens = std::max<int64_t>(s.gauges.kv_pages_total * s.gauges.kv_page_size, 4096);
  MX_LOG_INFO("data parallel: {} replicas ({} threads, {} KV tokens each), load balance {}",
              dp_size, std::max(1, total_threads / dp_size),
              s.gauges.kv_pages_total * s.gauges.kv_page_size,
              LoadBalanceMethodName(router.method));
  return MakeDpEngine(std::move(replicas), router);
}

}  // namespace mx
