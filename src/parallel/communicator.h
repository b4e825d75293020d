// Collective communication between the ranks of a parallel group (tensor / expert parallel
// shards of one model): all-reduce (sum), all-gather, broadcast and barrier over flat buffers.
// Two implementations sit behind the interface: in-process (ranks are threads sharing memory,
// in_process_communicator.h) and MPI (ranks are processes, on one host or many,
// mpi_communicator.h). Code above passes a `Communicator&` explicitly; there is no global group.
//
// Contract for every collective: each rank of the group calls it, in the same order, with the
// same element count (and the same root); calls block until the collective has completed on
// this rank. A count or root that differs between ranks is a programmer error (CHECK where it
// can be detected). Expected failures (a peer died, the runtime failed) return a Status.
//
// Numerics of AllReduceSum: the result is identical (bit for bit) on every rank. Integers
// stored as floats sum exactly while every partial sum stays below 2^24. Otherwise the result
// is within fp32 summation-order error of the exact sum: per element
//   |result - exact| <= (size() - 1) * 2^-24 * sum_r |x_r|     (kAllReduceRelTolerance)
// The in-process implementation adds in rank order 0, 1, ..., size() - 1.
//
// Thread-safety: a Communicator is used by one thread at a time (its rank's thread).
#pragma once

#include <cstddef>
#include <span>

#include "base/status.h"

namespace mx {

// Per element and per extra rank: |result - exact| <= (size - 1) * this * sum_r |x_r|.
inline constexpr double kAllReduceRelTolerance = 1.0 / (1 << 24);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // in [0, size())
  virtual int size() const = 0;

  // In place: on return `data` holds the element-wise sum of every rank's `data`.
  virtual Status AllReduceSum(std::span<float> data) = 0;
  // `out` (size() * in.size() bytes) receives every rank's `in`, rank r's at [r * in.size()).
  virtual Status AllGatherBytes(std::span<const std::byte> in, std::span<std::byte> out) = 0;
  // `data` on every rank becomes `root`'s.
  virtual Status BroadcastBytes(std::span<std::byte> data, int root) = 0;
  // Returns once every rank has entered it.
  virtual Status Barrier() = 0;

  // Typed forms of the byte collectives (floats, token ids, ...).
  template <typename T>
  Status AllGather(std::span<const T> in, std::span<T> out) {
    return AllGatherBytes(std::as_bytes(in), std::as_writable_bytes(out));
  }
  template <typename T>
  Status Broadcast(std::span<T> data, int root) {
    return BroadcastBytes(std::as_writable_bytes(data), root);
  }
};

}  // namespace mx
