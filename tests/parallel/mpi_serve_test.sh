#!/usr/bin/env bash
# `mpirun -np 2 mxserve serve MODEL --tp 2` (and --ep 2) end to end on one host: greedy answers
# equal a one-process server's; SIGTERM to rank 0 drains and ends the whole job with exit 0; a
# worker rank that dies (SIGKILL) ends the job with an error report instead of a hang.
# Usage: mpi_serve_test.sh MXSERVE MODEL_DIR. Exits 77 (ctest: skip) without mpirun.
set -u
mxserve=$1
model=$2
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
  exit 77
fi
export OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_pml=ob1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=tests/parallel/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

# start LOG ARGS...: runs ARGS in the background, waits for its port in LOG and its /health,
# sets $port and $pid.
start() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  pid=$!
  pids+=("$pid")
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log" | head -1)
    if [ -n "$port" ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  wait_healthy "$log" "http://127.0.0.1:$port"
}

serve_args=(serve "$model" --host 127.0.0.1 --port 0 --max-total-tokens 8192 --no-webui)
start "$tmp/one.log" "$mxserve" "${serve_args[@]}" || exit 1
want=$(answers "http://127.0.0.1:$port")
kill -TERM "$pid"
wait_exit "$pid" 30
check "the one-process server gives 4 answers" test "$(echo "$want" | grep -c '^"')" -eq 4

mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 "$mxserve")
for flag in --tp --ep; do
  start "$tmp/mpi$flag.log" "${mpi[@]}" "${serve_args[@]}" "$flag" 2 || exit 1
  got=$(answers "http://127.0.0.1:$port")
  check "mpirun -np 2 $flag 2: the same greedy answers" test "$got" = "$want"
  if [ "$got" != "$want" ]; then printf 'want:\n%s\ngot:\n%s\n' "$want" "$got"; fi
  check "$flag 2: the log names the group" grep -q "parallel over 2 ranks (MPI)" "$tmp/mpi$flag.log"
  rank0=$(rank_pid "$pid" 0)
  check "$flag 2: rank 0 found" test -n "$rank0"
  kill -TERM "$rank0"
  wait_exit "$pid" 60
  rc=$?
  check "$flag 2: SIGTERM to rank 0 ends the job with exit 0 (got $rc)" test "$rc" -eq 0
done

start "$tmp/kill.log" "${mpi[@]}" "${serve_args[@]}" --tp 2 || exit 1
rank1=$(rank_pid "$pid" 1)
check "rank 1 found" test -n "$rank1"
kill -9 "$rank1"
# A request in flight or not, the job must end, not hang.
curl -s -m 20 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"1+1=","max_tokens":8}' >/dev/null
wait_exit "$pid" 60
rc=$?
check "a dead worker ends the job with an error (got exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "mpirun reports the dead rank" grep -qiE "signal 9|killed|exited on signal|non-zero" \
  "$tmp/kill.log"
if [ $fails -ne 0 ]; then tail -20 "$tmp/kill.log"; fi
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
