// In-process collectives over shared memory: ranks publish their buffer pointers in the group's
// slots, meet at a barrier, work directly on each other's buffers, and meet again before any
// rank may touch its buffer (or its slot) for the next call.
#include "parallel/in_process_communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/check.h"

namespace mx {

namespace {

enum class Op { kAllReduce, kAllGather, kBroadcast, kBarrier };

const char* OpName(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "AllReduceSum";
    case Op::kAllGather:
      return "AllGather";
    case Op::kBroadcast:
      return "Broadcast";
    case Op::kBarrier:
      return "Barrier";
  }
  return "?";
}

struct Slot {
  Op op = Op::kBarrier;
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;  // floats (all-reduce) or bytes
  int root = 0;
};

// Spins before blocking: enough for ranks on their own cores to meet without a syscall, short
// enough not to starve ranks that share a core.
constexpr int kSpinIterations = 64;
// All-reduce slices are whole cache lines, so no two ranks write the same line.
constexpr size_t kSliceAlign = 16;
// Elements summed per pass over the ranks' buffers (stays in L1).
constexpr size_t kBlock = 512;

}  // namespace

struct InProcessGroup::State {
  explicit State(int n) : n(n), slots(n) {}
  const int n;
  std::vector<Slot> slots;
  std::atomic<int> arrived{0};
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> aborted{false};
  std::mutex mu;
  std::condition_variable cv;
  std::string abort_reason;  // guarded by mu

  Status AbortedStatus() {
    std::lock_guard<std::mutex> l(mu);
    return Status(StatusCode::kAborted, "in-process group aborted: " + abort_reason);
  }

  // A barrier among the n ranks; the slots written before it are visible to all after it.
  Status Arrive() {
    const uint64_t g = generation.load(std::memory_order_acquire);
    if (aborted.load(std::memory_order_acquire)) return AbortedStatus();
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      arrived.store(0, std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> l(mu);
        generation.store(g + 1, std::memory_order_release);
      }
      cv.notify_all();
      return Status::Ok();
    }
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation.load(std::memory_order_acquire) != g) return Status::Ok();
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] {
      return generation.load(std::memory_order_acquire) != g ||
             aborted.load(std::memory_order_acquire);
    });
    if (generation.load(std::memory_order_acquire) != g) return Status::Ok();
    return Status(StatusCode::kAborted, "in-process group aborted: " + abort_reason);
  }

  // Checks that every rank entered the same collective with the same shape.
  void CheckSame(int rank) const {
    const Slot& me = slots[rank];
    for (int k = 0; k < n; ++k) {
      const Slot& o = slots[k];
      MX_CHECK_MSG(o.op == me.op, fmt::format("rank {} is in {} while rank {} is in {}", k,
                                              OpName(o.op), rank, OpName(me.op)));
      MX_CHECK_MSG(o.count == me.count && o.root == me.root,
                   fmt::format("{}: rank {} has count {} root {}, rank {} has count {} root {}",
                               OpName(me.op), k, o.count, o.root, rank, me.count, me.root));
    }
  }
};

namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessGroup::State* state, int rank) : s_(state), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->n; }

  Status AllReduceSum(std::span<float> data) override {
    Slot& me = s_->slots[rank_];
    me = Slot{Op::kAllReduce, data.data(), data.data(), data.size(), 0};
    if (Status st = s_->Arrive(); !st.ok()) return st;
    s_->CheckSame(rank_);
    const size_t n = data.size();
    const size_t per = (n + s_->n - 1) / s_->n;
    const size_t slice = (per + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
    const size_t lo = std::min(n, rank_ * slice);
    const size_t hi = std::min(n, lo + slice);
    float acc[kBlock];
    for (size_t b = lo; b < hi; b += kBlock) {
      const size_t len = std::min(kBlock, hi - b);
      const float* first = static_cast<float*>(s_->slots[0].out) + b;
      std::copy(first, first + len, acc);
      for (int k = 1; k < s_->n; ++k) {
        const float* src = static_cast<float*>(s_->slots[k].out) + b;
        for (size_t i = 0; i < len; ++i) acc[i] += src[i];
      }
      for (int k = 0; k < s_->n; ++k) {
        std::copy(acc, acc + len, static_cast<float*>(s_->slots[k].out) + b);
      }
    }
    return s_->Arrive();
  }

  Status AllGatherBytes(std::span<const std::byte> in, std::span<std::byte> out) override {
    MX_CHECK_EQ(out.size(), in.size() * static_cast<size_t>(s_->n));
    Slot& me = s_->slots[rank_];
    me = Slot{Op::kAllGather, in.data(), out.data(), in.size(), 0};
    if (Status st = s_->Arrive(); !st.ok()) return st;
    s_->CheckSame(rank_);
    for (int k = 0; k < s_->n; ++k) {
      if (in.size() > 0) std::memcpy(out.data() + k * in.size(), s_->slots[k].in, in.size());
    }
    return s_->Arrive();
  }

  Status BroadcastBytes(std::span<std::byte> data, int root) override {
    MX_CHECK_MSG(root >= 0 && root < s_->n, fmt::format("root {} of {} ranks", root, s_->n));
    Slot& me = s_->slots[rank_];
    me = Slot{Op::kBroadcast, data.data(), data.data(), data.size(), root};
    if (Status st = s_->Arrive(); !st.ok()) return st;
    s_->CheckSame(rank_);
    if (rank_ != root && !data.empty()) {
      std::memcpy(data.data(), s_->slots[root].in, data.size());
    }
    return s_->Arrive();
  }

  Status Barrier() override {
    s_->slots[rank_] = Slot{Op::kBarrier, nullptr, nullptr, 0, 0};
    return s_->Arrive();
  }

 private:
  InProcessGroup::State* s_;
  int rank_;
};

}  // namespace

InProcessGroup::InProcessGroup(int size) {
  MX_CHECK_GE(size, 1);
  state_ = std::make_shared<State>(size);
  for (int r = 0; r < size; ++r) {
    ranks_.push_back(std::make_unique<InProcessCommunicator>(state_.get(), r));
  }
}

InProcessGroup::~InProcessGroup() = default;

Communicator& InProcessGroup::rank(int r) {
  MX_CHECK_MSG(r >= 0 && r < size(), fmt::format("rank {} of {}", r, size()));
  return *ranks_[r];
}

int InProcessGroup::ranks_waiting() const {
  return state_->arrived.load(std::memory_order_acquire);
}

void InProcessGroup::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> l(state_->mu);
    state_->abort_reason = reason;
    state_->aborted.store(true, std::memory_order_release);
  }
  state_->cv.notify_all();
}

}  // namespace mx
