# Shared by the `mpirun ... mxserve serve` shell tests (mpi_serve_test.sh, netns_two_hosts.sh):
# a pass / fail tally, waiting for a server, greedy answers, waiting for an exit, and finding a
# rank's process under mpirun. RUNNER... (optional) prefixes each curl, e.g. `ip netns exec NS`.
# Uses and sets: fails, passes; wait_healthy reads $pid (the server or mpirun).

fails=0
passes=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then
    passes=$((passes + 1))
  else
    echo "FAIL: $name"
    fails=$((fails + 1))
  fi
}

# wait_healthy LOG URL RUNNER...: waits until URL/health answers (curl run through RUNNER).
wait_healthy() {
  local log=$1 url=$2
  shift 2
  for _ in $(seq 1 300); do
    if "$@" curl -sf "$url/health" >/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  echo "server did not become healthy:"
  cat "$log"
  return 1
}

prompts=("12+34=" "7*8=" "100-58=" "9+9+9=")
answers() {  # answers URL RUNNER...: greedy completions of the prompts, one line each
  local url=$1
  shift
  for p in "${prompts[@]}"; do
    "$@" curl -s -m 30 "$url/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"prompt\":\"$p\",\"max_tokens\":16,\"temperature\":0}" | jq -c '.choices[0].text'
  done
}

# wait_exit PID SECONDS: the exit code, or 124 when it is still running after SECONDS.
wait_exit() {
  for _ in $(seq 1 $(($2 * 5))); do
    if ! kill -0 "$1" 2>/dev/null; then
      wait "$1"
      return $?
    fi
    sleep 0.2
  done
  return 124
}

descendants() {  # all processes below PID
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}
rank_pid() {  # rank_pid MPIRUN_PID RANK: that rank's mxserve process
  for c in $(descendants "$1"); do
    if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = mxserve ] &&
      tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$c"
      return
    fi
  done
}
