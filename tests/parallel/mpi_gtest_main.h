// main() of a gtest binary that every rank of `mpirun -np N` runs (tests/parallel/run_mpi.sh):
// makes the world communicator, lets only rank 0 print progress (a failure on any rank still
// sets its exit code, and mpirun's), runs the tests and ends MPI.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "parallel/mpi_communicator.h"

namespace mx::testing {

// Runs every test with *world set to the world communicator.
inline int RunMpiTests(int argc, char** argv, Communicator** world) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = CreateMpiCommunicator();
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
    return 1;
  }
  *world = comm->get();
  if ((*comm)->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  // A rank that failed must not leave the others waiting in a collective: all agree first.
  std::vector<float> failed = {rc != 0 ? 1.0f : 0.0f};
  (void)(*comm)->AllReduceSum(failed);
  if (rc == 0 && failed[0] > 0) {
    std::fprintf(stderr, "rank %d: another rank failed\n", (*comm)->rank());
    rc = 1;
  }
  *world = nullptr;
  comm->reset();
  return rc;
}

}  // namespace mx::testing
