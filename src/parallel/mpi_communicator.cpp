// Collectives over MPI (MPI_Allreduce in place, MPI_Allgather, MPI_Bcast, MPI_Barrier) on a
// duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN. Counts beyond INT_MAX are sent in pieces.
// Compiled against MPI only when CMake found it (MX_HAVE_MPI).
#include "parallel/mpi_communicator.h"

#ifdef MX_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <mutex>
#include <thread>

#include "base/check.h"

namespace mx {

namespace {

// note: MPI itself is per process; these only track who initialized it and who still uses it.
std::mutex g_mpi_mu;  // guards the runtime's lifetime (init / finalize)
int g_live = 0;       // communicators alive that this module initialized MPI for
bool g_we_initialized = false;

Status MpiError(int rc, const char* what) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  // note: Unavailable, like a dead peer in process (communicator.h): the group is unusable.
  return Status(StatusCode::kUnavailable,
                fmt::format("MPI {} failed: {}", what, std::string(msg, len)));
}

// The largest piece one MPI call moves (its count is an int).
constexpr size_t kMaxPiece = static_cast<size_t>(INT_MAX);

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~MpiCommunicator() override {
    std::lock_guard<std::mutex> l(g_mpi_mu);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
    if (--g_live == 0 && g_we_initialized && !finalized) {
      MPI_Finalize();
      g_we_initialized = false;
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceSum(std::span<float> data) override {
    for (size_t off = 0; off < data.size(); off += kMaxPiece) {
      const size_t len = std::min(kMaxPiece, data.size() - off);
      int rc = MPI_Allreduce(MPI_IN_PLACE, data.data() + off, static_cast<int>(len), MPI_FLOAT,
                             MPI_SUM, comm_);
      if (rc != MPI_SUCCESS) return MpiError(rc, "Allreduce");
    }
    return Status::Ok();
  }

  Status AllGatherBytes(std::span<const std::byte> in, std::span<std::byte> out) override {
    MX_CHECK_EQ(out.size(), in.size() * static_cast<size_t>(size_));
    if (in.size() <= kMaxPiece) {
      int rc = MPI_Allgather(in.data(), static_cast<int>(in.size()), MPI_BYTE, out.data(),
                             static_cast<int>(in.size()), MPI_BYTE, comm_);
      return rc == MPI_SUCCESS ? Status::Ok() : MpiError(rc, "Allgather");
    }
    // Very large pieces: one broadcast per rank.
    for (int r = 0; r < size_; ++r) {
      std::span<std::byte> dst = out.subspan(r * in.size(), in.size());
      if (r == rank_) std::copy(in.begin(), in.end(), dst.begin());
      if (Status st = BroadcastBytes(dst, r); !st.ok()) return st;
    }
    return Status::Ok();
  }

  Status BroadcastBytes(std::span<std::byte> data, int root) override {
    MX_CHECK_MSG(root >= 0 && root < size_, fmt::format("root {} of {} ranks", root, size_));
    for (size_t off = 0; off < data.size(); off += kMaxPiece) {
      const size_t len = std::min(kMaxPiece, data.size() - off);
      // A receiver may wait long (a tensor-parallel worker between requests): poll a
      // non-blocking broadcast, spinning briefly and then sleeping up to 1 ms between polls,
      // instead of MPI_Bcast's busy wait, which would hold a core while idle. (The root uses
      // MPI_Ibcast too: a blocking collective does not match a non-blocking one.)
      MPI_Request req;
      int rc = MPI_Ibcast(data.data() + off, static_cast<int>(len), MPI_BYTE, root, comm_, &req);
      if (rc != MPI_SUCCESS) return MpiError(rc, "Ibcast");
      if (rank_ == root) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return MpiError(rc, "Ibcast");
        continue;
      }
      for (int polls = 0;; ++polls) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return MpiError(rc, "Ibcast");
        if (done) break;
        if (polls > 2000) {
          std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 1000 : 50));
        }
      }
    }
    return Status::Ok();
  }

  Status Barrier() override {
    int rc = MPI_Barrier(comm_);
    return rc == MPI_SUCCESS ? Status::Ok() : MpiError(rc, "Barrier");
  }

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
};

}  // namespace

bool MpiBuilt() { return true; }

Result<std::unique_ptr<Communicator>> CreateMpiCommunicator() {
  std::lock_guard<std::mutex> l(g_mpi_mu);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return MpiError(rc, "Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      return Status(StatusCode::kInternal,
                    fmt::format("MPI gives thread level {}; MPI_THREAD_SERIALIZED ({}) is needed",
                                provided, MPI_THREAD_SERIALIZED));
    }
    g_we_initialized = true;
  }
  MPI_Comm comm;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return MpiError(rc, "Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ++g_live;
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(comm, rank, size));
}

}  // namespace mx

#else  // !MX_HAVE_MPI

namespace mx {

bool MpiBuilt() { return false; }

Result<std::unique_ptr<Communicator>> CreateMpiCommunicator() {
  return Unimplemented(
      "mxserve was built without MPI (install libopenmpi-dev openmpi-bin and reconfigure)");
}

}  // namespace mx

#endif
