#!/usr/bin/env bash
# `mpirun -np 2 --host A,B mxserve serve MODEL --tp 2` across two "hosts" on one machine: two
# network namespaces joined by a veth pair (10.77.0.1/24 and 10.77.0.2/24), mpirun and rank 0 in
# the first, rank 1 started in the second by Open MPI's rsh launcher through an agent script that
# stands in for ssh (`agent HOST command...` -> `ip netns exec NS sh -c command...`). The ranks
# talk over TCP across the veth only (btl self,tcp; btl / oob restricted to 10.77.0.0/24).
# Checks: each rank runs in its own namespace; MPI traffic crosses the veth; greedy answers equal
# a one-process server's; the HTTP port is reachable from the other namespace; SIGTERM to rank 0
# with a long request in flight lets it finish and ends the job with exit 0; --ep 2 with the
# hosts from a hostfile answers the same; a worker killed with SIGKILL ends the job with an
# error, no hang. --bind-to none: by default Open MPI pins each of two ranks to one core, here
# both to core 0 of the one machine (~30 ms a token instead of < 1).
# Usage: netns_two_hosts.sh MXSERVE MODEL_DIR (docs/multi-node.md). Needs root (ip netns);
# exits 77 (ctest: skip) without mpirun / jq / curl or when `ip netns add` is not permitted.
set -u
mxserve=$(realpath "$1")
model=$(realpath "$2")
for tool in mpirun jq curl ip; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found"
    exit 77
  fi
done
nsa=mxa$$
nsb=mxb$$
ipa=10.77.0.1
ipb=10.77.0.2
if ! ip netns add "$nsa" 2>/dev/null; then
  echo "SKIP: 'ip netns add' is not permitted here (needs root / CAP_SYS_ADMIN)"
  exit 77
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for ns in "$nsa" "$nsb"; do
    # shellcheck disable=SC2046
    kill -9 $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null
    ip netns del "$ns" 2>/dev/null  # takes its end of the veth pair with it
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
inA() { ip netns exec "$nsa" "$@"; }
inB() { ip netns exec "$nsb" "$@"; }
if ! { ip netns add "$nsb" &&
  ip link add "va$$" type veth peer name "vb$$" &&
  ip link set "va$$" netns "$nsa" && ip link set "vb$$" netns "$nsb" &&
  ip -n "$nsa" addr add "$ipa/24" dev "va$$" && ip -n "$nsb" addr add "$ipb/24" dev "vb$$" &&
  ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
  ip -n "$nsa" link set "va$$" up && ip -n "$nsb" link set "vb$$" up; }; then
  echo "could not set up the namespaces"
  exit 1
fi

# The launcher's "ssh": HOST -> its namespace. (Open MPI passes the remote command as words for
# a remote shell, quoting included, as ssh would.)
cat >"$tmp/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
  $ipa) ns=$nsa ;;
  $ipb) ns=$nsb ;;
  *) echo "agent: unknown host \$host" >&2; exit 255 ;;
esac
echo "agent: \$host -> \$ns: \$*" >>"$tmp/agent.log"
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$tmp/agent"

# Only the MCA settings this test means; none inherited (e.g. plm=isolated from run_mpi.sh).
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export OMPI_MCA_plm=rsh OMPI_MCA_plm_rsh_agent=$tmp/agent
export OMPI_MCA_btl=self,tcp OMPI_MCA_pml=ob1
export OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 OMPI_MCA_oob_tcp_if_include=10.77.0.0/24
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# shellcheck source=tests/parallel/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

netns_of() { stat -L -c %i "/proc/$1/ns/net" 2>/dev/null; }
veth_tx() { inB cat "/sys/class/net/vb$$/statistics/tx_bytes"; }

t0=$(date +%s)
serve_args=(serve "$model" --host 0.0.0.0 --port 30000 --max-total-tokens 8192 --no-webui)

# The reference: one process, alone in namespace A.
ip netns exec "$nsa" "$mxserve" "${serve_args[@]}" >"$tmp/one.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_healthy "$tmp/one.log" "http://$ipa:30000" inA || exit 1
want=$(answers "http://$ipa:30000" inA)
kill -TERM "$pid"
wait_exit "$pid" 30
check "the one-process server gives 4 answers" test "$(echo "$want" | grep -c '^"')" -eq 4

mpi=(mpirun --allow-run-as-root -np 2 --host "$ipa,$ipb" --bind-to none
  "$mxserve" "${serve_args[@]}" --tp 2)
ip netns exec "$nsa" "${mpi[@]}" >"$tmp/mpi.log" 2>&1 &
pid=$!  # ip netns exec execs: this is mpirun
pids+=("$pid")
wait_healthy "$tmp/mpi.log" "http://$ipa:30000" inA || exit 1
rank0=$(rank_pid "$pid" 0)
rank1=$(rank_pid "$pid" 1)
check "rank 0 and rank 1 found" test -n "$rank0" -a -n "$rank1"
neta=$(stat -L -c %i "/run/netns/$nsa")
netb=$(stat -L -c %i "/run/netns/$nsb")
echo "mpirun $pid: rank 0 pid $rank0 net:[$(netns_of "$rank0")], rank 1 pid $rank1" \
  "net:[$(netns_of "$rank1")]; namespaces $nsa net:[$neta], $nsb net:[$netb]"
check "rank 0 runs in namespace A" test "$(netns_of "$rank0")" = "$neta"
check "rank 1 runs in namespace B" test "$(netns_of "$rank1")" = "$netb"
cpus() { sed -n 's/^Cpus_allowed_list:\s*//p' "/proc/$1/status"; }
check "--bind-to none: rank 1 may use every core ($(cpus "$rank1") vs $(cpus $$))" \
  test "$(cpus "$rank1")" = "$(cpus $$)"
check "the launcher started namespace B's daemon through the agent" \
  grep -q "$ipb -> $nsb: .*orted" "$tmp/agent.log"

tx0=$(veth_tx)
got=$(answers "http://$ipa:30000" inA)  # from A to A: HTTP stays off the veth
tx1=$(veth_tx)
check "mpirun -np 2 --host A,B --tp 2: the same greedy answers" test "$got" = "$want"
if [ "$got" != "$want" ]; then printf 'want:\n%s\ngot:\n%s\n' "$want" "$got"; fi
echo "rank 1 sent $((tx1 - tx0)) bytes over the veth during the 4 completions"
check "rank 1's side of the work crossed the veth (tx $((tx1 - tx0)) bytes)" \
  test $((tx1 - tx0)) -gt 10000
check "the log names the group" grep -q "tensor parallel over 2 ranks (MPI)" "$tmp/mpi.log"
fromb=$(answers "http://$ipa:30000" inB | head -1)
check "rank 0's HTTP port answers from namespace B too" test "$fromb" = "$(echo "$want" | head -1)"

# A long streamed request in flight when rank 0 gets SIGTERM: it drains, the workers too, exit 0.
# 1500 tokens: seconds of work at TP2 over the veth, inside the 30 s drain even on a loaded host.
ip netns exec "$nsa" curl -sN -m 60 "http://$ipa:30000/v1/completions" \
  -H 'Content-Type: application/json' -d '{"prompt":"1+1=","max_tokens":1500,"temperature":0,
  "ignore_eos":true,"stream":true}' >"$tmp/drain.sse" &
cpid=$!
for _ in $(seq 1 600); do
  if grep -q '^data: {' "$tmp/drain.sse"; then break; fi
  sleep 0.05
done
check "a long request is in flight at SIGTERM" \
  test -n "$(grep -m1 '^data: {' "$tmp/drain.sse")" -a -z "$(grep '\[DONE\]' "$tmp/drain.sse")"
kill -TERM "$rank0"
wait_exit "$pid" 60
rc=$?
check "SIGTERM to rank 0 ends the job with exit 0 (got $rc)" test "$rc" -eq 0
check "rank 0 drained" grep -q "SIGTERM: draining" "$tmp/mpi.log"
wait "$cpid"
check "the request in flight finished (finish_reason length, [DONE])" \
  grep -q '"finish_reason":"length"' "$tmp/drain.sse"
check "the stream ended with [DONE]" grep -qx 'data: \[DONE\]' "$tmp/drain.sse"
check "nothing is left in namespace B" test -z "$(ip netns pids "$nsb")"

# --ep 2, with the hosts from a hostfile instead of --host.
printf '%s slots=1\n%s slots=1\n' "$ipa" "$ipb" >"$tmp/hostfile"
ip netns exec "$nsa" mpirun --allow-run-as-root -np 2 --hostfile "$tmp/hostfile" --bind-to none \
  "$mxserve" "${serve_args[@]}" --ep 2 >"$tmp/ep.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_healthy "$tmp/ep.log" "http://$ipa:30000" inA || exit 1
rank0=$(rank_pid "$pid" 0)
rank1=$(rank_pid "$pid" 1)
check "--ep 2 --hostfile: rank 1 runs in namespace B" test "$(netns_of "$rank1")" = "$netb"
got=$(answers "http://$ipa:30000" inA)
check "--ep 2 --hostfile: the same greedy answers" test "$got" = "$want"
if [ "$got" != "$want" ]; then printf 'want:\n%s\ngot:\n%s\n' "$want" "$got"; fi
check "--ep 2: the log names the group" grep -q "expert parallel over 2 ranks (MPI)" "$tmp/ep.log"
kill -TERM "$rank0"
wait_exit "$pid" 60
rc=$?
check "--ep 2: SIGTERM to rank 0 ends the job with exit 0 (got $rc)" test "$rc" -eq 0

# A worker that dies ends the job (mpirun reports it), not a hang.
ip netns exec "$nsa" "${mpi[@]}" >"$tmp/kill.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_healthy "$tmp/kill.log" "http://$ipa:30000" inA || exit 1
rank1=$(rank_pid "$pid" 1)
check "rank 1 found (second job)" test -n "$rank1"
kill -9 "$rank1"
inA curl -s -m 20 "http://$ipa:30000/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"1+1=","max_tokens":8}' >/dev/null
wait_exit "$pid" 60
rc=$?
check "a dead worker ends the job with an error (got exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "mpirun reports the dead rank" grep -qiE "signal 9|killed|exited on signal|non-zero" \
  "$tmp/kill.log"
check "nothing is left in namespace B after the failure" test -z "$(ip netns pids "$nsb")"
if [ $fails -ne 0 ]; then
  echo "--- mpi.log"
  tail -20 "$tmp/mpi.log"
  echo "--- kill.log"
  tail -20 "$tmp/kill.log"
fi
echo "($(($(date +%s) - t0)) s)"
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
