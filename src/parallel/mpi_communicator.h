// The MPI Communicator (Open MPI): ranks are processes started by `mpirun -np N`, on one host or
// across hosts. One Communicator per process over a duplicate of MPI_COMM_WORLD. MPI is
// initialized (MPI_THREAD_SERIALIZED) by the first CreateMpiCommunicator and finalized when the
// last communicator it made is destroyed. Errors from the runtime come back as a Status naming
// the collective (MPI_ERRORS_RETURN), not an abort.
//
// Built only when CMake finds MPI; otherwise MpiBuilt() is false and CreateMpiCommunicator
// returns Unimplemented.
#pragma once

#include <memory>

#include "parallel/communicator.h"

namespace mx {

bool MpiBuilt();

// Errors: Unimplemented (built without MPI), Internal (MPI_Init_thread failed or the runtime
// cannot give MPI_THREAD_SERIALIZED).
Result<std::unique_ptr<Communicator>> CreateMpiCommunicator();

}  // namespace mx
