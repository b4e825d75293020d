// The in-process Communicator: a group of N ranks that are threads of one process sharing
// memory. Collectives exchange pointers through the group and copy / add directly between the
// ranks' buffers (no staging copy): an all-reduce has every rank sum its own 1/N slice of the
// buffer across all ranks and write the slice back to all of them, so the work is split N ways.
//
// Waiting spins briefly and then blocks, so a group may have more ranks than cores.
//
// Thread-safety: the group is shared by its ranks; each Communicator is used by one thread.
// Abort() may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace mx {

class InProcessGroup {
 public:
  // REQUIRES: size >= 1.
  explicit InProcessGroup(int size);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  // Rank r's communicator, to be used by one thread. REQUIRES: 0 <= r < size(). Valid while the
  // group lives.
  Communicator& rank(int r);

  // Fails the group: every collective that is waiting, and every later one, returns Aborted with
  // `reason` (for a rank that died, so the others do not wait for it forever).
  void Abort(const std::string& reason);

  // How many ranks have reached the rendezvous that is not yet complete (tests order an action
  // after ranks are inside a collective by waiting for this, not for time).
  int ranks_waiting() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

}  // namespace mx
