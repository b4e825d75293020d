#!/usr/bin/env bash
# Runs an MPI test binary under mpirun with NP ranks on this host, with no ssh and no network
# (a container is enough). Exits 77 (ctest: skipped) when mpirun or the MPI build is absent.
# Usage: run_mpi.sh NP BINARY
set -u
np=$1
bin=${2:-}
if [ -z "$bin" ]; then
  echo "SKIP: mxserve was built without MPI (scripts/install-deps.sh installs libopenmpi-dev)"
  exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
  exit 77
fi
export OMPI_MCA_plm=isolated                          # launch local ranks only: no ssh / rsh
export OMPI_MCA_btl=self,vader                        # shared memory between ranks, no network
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # CMA needs ptrace rights containers lack
export OMPI_MCA_pml=ob1                               # do not probe UCX / fabrics
export OMPI_MCA_rmaps_base_oversubscribe=1            # more ranks than cores is fine here
# Under the ASan build: Open MPI's own start-up allocations (in libmpi and in MCA plugins it
# dlopens and unloads, which LeakSanitizer cannot name for a suppression) are never freed; leak
# checking stays on for everything else, and ASan's other checks stay on here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
exec timeout 100 mpirun --allow-run-as-root --oversubscribe -np "$np" "$bin"
