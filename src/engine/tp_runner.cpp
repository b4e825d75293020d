// The tensor / expert parallel runner: driver, worker loop and the step they exchange (see
// tp_runner.h).
#include "engine/tp_runner.h"

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "kv/paged_kv_store.h"
#include "parallel/in_process_communicator.h"

namespace mx {

namespace {

// What rank 0 broadcasts before each forward: a header and the batch. Encoded as a flat
// little-endian byte string: fields in declaration order, vectors as an int64 count then their
// elements; the forward batch, then the MTP batch (one of them empty).
struct StepHeader {
  enum Op : int32_t { kForward = 1, kForwardMtp = 2, kStop = 3 };
  int32_t op = kStop;
  uint8_t prune = 0;  // kForward: ForwardOptions::prune_last_layer (every rank prunes alike)
  // The driver's KV geometry (the worker makes its store once, from the first step) and the
  // page table of each sequence, batch order.
  KvPageLayout kv;
};

// A step as a worker decodes it.
struct Step : StepHeader {
  ForwardBatch fwd;  // kForward
  MtpBatch mtp;      // kForwardMtp
};

class Writer {
 public:
  template <typename T>
  void Pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Pod(static_cast<int64_t>(v.size()));
    if (v.empty()) return;  // data() may be null
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<std::byte>& bytes() { return buf_; }

 private:
  std::vector<std::byte> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}
  template <typename T>
  bool Pod(T& v) {
    if (b_.size() - off_ < sizeof(T)) return false;
    std::memcpy(&v, b_.data() + off_, sizeof(T));
    off_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool Vec(std::vector<T>& v) {
    int64_t n = 0;
    if (!Pod(n) || n < 0 || static_cast<uint64_t>(n) > (b_.size() - off_) / sizeof(T)) return false;
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), b_.data() + off_, n * sizeof(T));  // data() may be null
    off_ += n * sizeof(T);
    return true;
  }
  bool done() const { return off_ == b_.size(); }

 private:
  std::span<const std::byte> b_;
  size_t off_ = 0;
};

// The driver encodes its batch in place (no copy into a Step).
std::vector<std::byte> Encode(const StepHeader& s, const ForwardBatch& fwd, const MtpBatch& mtp) {
  Writer w;
  w.Pod(s.op);
  w.Pod(s.prune);
  w.Pod(s.kv.page_size);
  w.Pod(s.kv.n_pages);
  w.Pod(static_cast<int32_t>(s.kv.dtype));
  w.Vec(s.kv.layer_scales);
  w.Pod(static_cast<int64_t>(fwd.seqs.size()));
  for (const SequenceInput& q : fwd.seqs) {
    w.Pod(q.seq);
    w.Pod(q.start_pos);
    w.Vec(q.tokens);
    w.Vec(q.mtp_next);
    w.Pod(static_cast<uint8_t>(q.all_logits));
  }
  w.Pod(static_cast<int64_t>(mtp.seqs.size()));
  for (const MtpSequenceInput& q : mtp.seqs) {
    w.Pod(q.seq);
    w.Pod(q.start_pos);
    w.Vec(q.tokens);
    w.Vec(q.hidden);
    w.Vec(q.topk);
  }
  w.Pod(static_cast<uint8_t>(mtp.last_logits));
  w.Pod(static_cast<int64_t>(s.kv.tables.size()));
  for (const auto& t : s.kv.tables) w.Vec(t);
  return std::move(w.bytes());
}

Result<Step> Decode(std::span<const std::byte> bytes) {
  Reader r(bytes);
  Step s;
  int64_t n = 0;
  int32_t dtype = -1;
  bool ok = r.Pod(s.op) && r.Pod(s.prune) && s.prune <= 1 && r.Pod(s.kv.page_size) &&
            r.Pod(s.kv.n_pages) && r.Pod(dtype) &&
            dtype >= static_cast<int32_t>(KvCacheDtype::kF32) &&
            dtype <= static_cast<int32_t>(KvCacheDtype::kFp8E4M3Fnuz) && r.Vec(s.kv.layer_scales) &&
            r.Pod(n) && n >= 0;
  s.kv.dtype = static_cast<KvCacheDtype>(dtype);
  for (int64_t i = 0; ok && i < n; ++i) {
    SequenceInput& q = s.fwd.seqs.emplace_back();
    uint8_t all = 0;
    ok = r.Pod(q.seq) && r.Pod(q.start_pos) && r.Vec(q.tokens) && r.Vec(q.mtp_next) && r.Pod(all);
    q.all_logits = all != 0;
  }
  ok = ok && r.Pod(n) && n >= 0;
  for (int64_t i = 0; ok && i < n; ++i) {
    MtpSequenceInput& q = s.mtp.seqs.emplace_back();
    ok = r.Pod(q.seq) && r.Pod(q.start_pos) && r.Vec(q.tokens) && r.Vec(q.hidden) && r.Vec(q.topk);
  }
  uint8_t last_logits = 0;
  ok = ok && r.Pod(last_logits);
  s.mtp.last_logits = last_logits != 0;
  ok = ok && r.Pod(n) && n >= 0;
  for (int64_t i = 0; ok && i < n; ++i) ok = r.Vec(s.kv.tables.emplace_back());
  if (!ok || !r.done() || s.op < StepHeader::kForward || s.op > StepHeader::kStop) {
    return Internal("tensor-parallel step of {} bytes is malformed", bytes.size());
  }
  return s;
}

// A collective failure: the group is broken, the runner with it (model_runner.h).
Status GroupFailed(const Status& st) {
  return Status(StatusCode::kUnavailable,
                fmt::format("tensor-parallel group failed: {}", st.message()));
}

int PerRankThreads(int threads, int size) {
  const int total = threads > 0 ? threads : ThreadPool::HardwareThreads();
  return std::max(1, total / size);
}

class TpDriver final : public ModelRunner {
 public:
  TpDriver(std::unique_ptr<Model> model, Communicator& comm, const KernelTable& kt, int threads,
           MoeTuning moe)
      : model_(std::move(model)), comm_(comm), kt_(kt), pool_(threads), moe_(std::move(moe)) {
    MX_CHECK_EQ(comm_.rank(), 0);
    MX_CHECK_EQ(model_->shard().size, comm_.size());
  }

  ~TpDriver() override {
    if (Status st = Send(StepHeader{}, {}, {}); !st.ok()) {  // op kStop
      MX_LOG_WARN("stopping the workers: {}", st.ToString());
    }
  }

  const ModelConfig& config() const override { return model_->config(); }
  const MoeTuning* moe_tuning() const override { return &moe_; }

  Result<std::vector<float>> Forward(const ForwardBatch& batch, KvStore& kv) override {
    MX_ASSIGN_OR_RETURN(ForwardOutput out, Run(batch, kv, /*prune=*/true));
    return std::move(out.logits);
  }

  Result<ForwardOutput> ForwardRows(const ForwardBatch& batch, KvStore& kv) override {
    return Run(batch, kv, /*prune=*/false);
  }

  Result<MtpOutput> ForwardMtp(const MtpBatch& batch, KvStore& kv) override {
    MX_RETURN_IF_ERROR(Broadcast(StepHeader::kForwardMtp, {}, batch, kv));
    return Checked(model_->ForwardMtp(batch, kv, kt_, pool_, moe_.For(batch), &comm_));
  }

 private:
  // A forward's collective failure breaks the group (model_runner.h: IsRunnerFailure).
  template <typename T>
  static Result<T> Checked(Result<T> out) {
    if (!out.ok() && IsRunnerFailure(out.status())) return GroupFailed(out.status());
    return out;
  }

  // The forward on every rank; `prune`: only the logits are read (prune_last_layer).
  Result<ForwardOutput> Run(const ForwardBatch& batch, KvStore& kv, bool prune) {
    MX_RETURN_IF_ERROR(Broadcast(StepHeader::kForward, batch, {}, kv, prune));
    ForwardOptions opts;
    opts.logits = LogitsMode::kLast;
    opts.prune_last_layer = prune;
    opts.moe = moe_.For(batch);
    opts.comm = &comm_;
    return Checked(model_->Forward(batch, opts, kv, kt_, pool_));
  }

  // Broadcasts step `op` over `fwd` or `mtp` with the KV geometry and the page tables.
  Status Broadcast(int32_t op, const ForwardBatch& fwd, const MtpBatch& mtp, KvStore& kv,
                   bool prune = false) {
    std::vector<int64_t> seqs;
    for (const SequenceInput& q : fwd.seqs) seqs.push_back(q.seq);
    for (const MtpSequenceInput& q : mtp.seqs) seqs.push_back(q.seq);
    StepHeader h;
    h.op = op;
    h.prune = prune ? 1 : 0;
    MX_ASSIGN_OR_RETURN(h.kv, kv.PageLayout(seqs));
    return Send(h, fwd, mtp);
  }

  Status Send(const StepHeader& h, const ForwardBatch& fwd, const MtpBatch& mtp) {
    std::vector<std::byte> bytes = Encode(h, fwd, mtp);
    int64_t n = static_cast<int64_t>(bytes.size());
    if (Status st = comm_.Broadcast(std::span<int64_t>(&n, 1), 0); !st.ok()) {
      return GroupFailed(st);
    }
    if (Status st = comm_.BroadcastBytes(bytes, 0); !st.ok()) return GroupFailed(st);
    return Status::Ok();
  }

  std::unique_ptr<Model> model_;
  Communicator& comm_;
  const KernelTable& kt_;
  ThreadPool pool_;
  MoeTuning moe_;
};

class InProcessTpRunnerImpl final : public InProcessTpRunner {
 public:
  InProcessTpRunnerImpl(std::vector<std::unique_ptr<Model>> shards, const KernelTable& kt,
                        int threads, MoeTuning moe)
      : group_(static_cast<int>(shards.size())), moe_(moe) {
    const int size = group_.size();
    const int per = PerRankThreads(threads, size);
    for (int r = 1; r < size; ++r) workers_.push_back(std::move(shards[r]));
    driver_ =
        std::make_unique<TpDriver>(std::move(shards[0]), group_.rank(0), kt, per, std::move(moe));
    for (int r = 1; r < size; ++r) {
      threads_.emplace_back([this, r, per, &kt] {
        Status st = RunTpWorker(*workers_[r - 1], group_.rank(r), kt, per, moe_);
        if (!st.ok()) group_.Abort(fmt::format("rank {} stopped: {}", r, st.message()));
      });
    }
  }

  ~InProcessTpRunnerImpl() override {
    driver_.reset();  // tells the workers to stop
    for (auto& t : threads_) t.join();
  }

  const ModelConfig& config() const override { return driver_->config(); }
  const MoeTuning* moe_tuning() const override { return driver_->moe_tuning(); }
  Result<std::vector<float>> Forward(const ForwardBatch& b, KvStore& kv) override {
    return driver_->Forward(b, kv);
  }
  Result<ForwardOutput> ForwardRows(const ForwardBatch& b, KvStore& kv) override {
    return driver_->ForwardRows(b, kv);
  }
  Result<MtpOutput> ForwardMtp(const MtpBatch& b, KvStore& kv) override {
    return driver_->ForwardMtp(b, kv);
  }

  void FailRank(int rank, const std::string& reason) override {
    MX_CHECK(rank > 0 && rank < group_.size());
    group_.Abort(fmt::format("rank {} stopped: {}", rank, reason));
  }

 private:
  InProcessGroup group_;
  MoeTuning moe_;  // the workers' copy
  std::vector<std::unique_ptr<Model>> workers_;
  std::unique_ptr<TpDriver> driver_;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<ModelRunner> MakeTpDriverRunner(std::unique_ptr<Model> shard, Communicator& comm,
                                                const KernelTable& kt, int threads, MoeTuning moe) {
  return std::make_unique<TpDriver>(std::move(shard), comm, kt, threads, std::move(moe));
}

Status RunTpWorker(const Model& shard, Communicator& comm, const KernelTable& kt, int threads,
                   const MoeTuning& moe) {
  MX_CHECK_GT(comm.rank(), 0);
  ThreadPool pool(threads);
  std::unique_ptr<PagedKvStore> kv;
  std::set<int64_t> held;  // sequences whose page tables the store holds
  for (;;) {
    int64_t n = 0;
    MX_RETURN_IF_ERROR(comm.Broadcast(std::span<int64_t>(&n, 1), 0));
    if (n < 0 || n > (int64_t{1} << 34)) return Internal("tensor-parallel step of {} bytes", n);
    std::vector<std::byte> bytes(n);
    MX_RETURN_IF_ERROR(comm.BroadcastBytes(bytes, 0));
    MX_ASSIGN_OR_RETURN(Step s, Decode(bytes));
    if (s.op == StepHeader::kStop) return Status::Ok();
    if (kv == nullptr) {
      kv = std::make_unique<PagedKvStore>(shard.config(), s.kv.page_size, s.kv.n_pages, s.kv.dtype,
                                          s.kv.layer_scales);
    } else if (kv->page_size() != s.kv.page_size || kv->n_pages() != s.kv.n_pages) {
      return FailedPrecondition("the driver's KV geometry changed ({} pages of {} → {} of {})",
                                kv->n_pages(), kv->page_size(), s.kv.n_pages, s.kv.page_size);
    }
    std::vector<int64_t> seqs;  // the tables' order: the forward batch's, then the MTP batch's
    for (const SequenceInput& q : s.fwd.seqs) seqs.push_back(q.seq);
    for (const MtpSequenceInput& q : s.mtp.seqs) seqs.push_back(q.seq);
    if (s.kv.tables.size() != seqs.size()) {
      return Internal("tensor-parallel step without page tables");
    }
    std::set<int64_t> now;
    for (size_t i = 0; i < seqs.size(); ++i) {
      kv->PageTable(seqs[i]) = std::move(s.kv.tables[i]);
      now.insert(seqs[i]);
    }
    // A sequence the driver no longer sends keeps its table until the next step it is in;
    // drop those not in this step so finished requests do not pile up.
    for (int64_t seq : held) {
      if (!now.count(seq)) kv->RemoveSequence(seq);
    }
    held = std::move(now);
    Status st;
    if (s.op == StepHeader::kForward) {
      ForwardOptions opts;
      opts.logits = LogitsMode::kLast;
      opts.prune_last_layer = s.prune != 0;
      opts.moe = moe.For(s.fwd);
      opts.comm = &comm;
      st = shard.Forward(s.fwd, opts, *kv, kt, pool).status();
    } else {
      st = shard.ForwardMtp(s.mtp, *kv, kt, pool, moe.For(s.mtp), &comm).status();
    }
    if (IsRunnerFailure(st)) return st;
    if (!st.ok()) MX_LOG_WARN("tensor-parallel rank {}: {}", comm.rank(), st.ToString());
  }
}

Result<std::unique_ptr<InProcessTpRunner>> InProcessTpRunner::Create(
    std::vector<std::unique_ptr<Model>> shards, const KernelTable& kt, int threads, MoeTuning moe) {
  if (shards.size() < 2) return InvalidArgument("an in-process group needs at least 2 shards");
  for (size_t r = 0; r < shards.size(); ++r) {
    const ModelShard& s = shards[r]->shard();
    if (s.rank != static_cast<int>(r) || s.size != static_cast<int>(shards.size())) {
      return InvalidArgument("shard {} is {}", r, s.Describe());
    }
  }
  return std::unique_ptr<InProcessTpRunner>(
      std::make_unique<InProcessTpRunnerImpl>(std::move(shards), kt, threads, std::move(moe)));
}

}  // namespace mx
