#!/usr/bin/env bash
# Serving side by side: mxserve and ik_llama.cpp's llama-server (../shared/anchors) on the same
# bench-scale weights, each started fresh for every round (a warm prefix cache would carry the
# previous round's prompts), the engines alternating, the same `mxserve bench serve` workload
# (token-id prompts on /v1/completions) against both. Run it on a quiet host.
#
#   scripts/serve-side-by-side.sh [ROUNDS=3] [OUT=/tmp/serve-sbs]
#
# Needs: /tmp/mxserve-bench-scale/mxfp4 (bench/model_bench writes it, with its tokenizer.json),
# /tmp/side-by-side/ik.gguf (../shared/anchors/hf_to_gguf.py /tmp/mxserve-bench-scale/bf16
# /tmp/side-by-side/ik.gguf --experts mxfp4), /tmp/llama-server (unpacked from
# ../shared/anchors/llama-server.xz). Prints one line per run; the full reports are in OUT.
# WORKLOAD overrides the bench serve arguments (default: docs/performance.md, "Serving").
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT=${2:-/tmp/serve-sbs}
MXSERVE=${MXSERVE:-build/release/src/cli/mxserve}
CKPT=${CKPT:-/tmp/mxserve-bench-scale/mxfp4}
GGUF=${GGUF:-/tmp/side-by-side/ik.gguf}
THREADS=${THREADS:-2}  # llama-server -t; mxserve serve uses every core
WORKLOAD=${WORKLOAD:---num-prompts 16 --max-concurrency 4 --random-input-len 1000 --random-output-len 50 --shared-prefix-ratio 0.6 --num-prefix-groups 2 --warm-prefixes --seed 1}
mkdir -p "$OUT"

wait_ready() {  # port, pid
  for _ in $(seq 600); do
    if curl -sf "http://127.0.0.1:$1/health" > /dev/null 2>&1; then return 0; fi
    if ! kill -0 "$2" 2> /dev/null; then echo "server on port $1 exited" >&2; return 1; fi
    sleep 0.5
  done
  echo "server on port $1 not ready after 300 s" >&2
  return 1
}

run_one() {  # name, port, model, server command...
  local name=$1 port=$2 model=$3
  shift 3
  "$@" > "$OUT/$name-server-$round.log" 2>&1 &
  local pid=$!
  wait_ready "$port" "$pid"
  # shellcheck disable=SC2086
  "$MXSERVE" bench serve --base-url "http://127.0.0.1:$port" --model "$model" \
    --endpoint completions $WORKLOAD > "$OUT/$name-$round.txt" 2>&1 || true
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  echo "$name round $round: $(grep -iE 'total.*tok/s|TTFT' "$OUT/$name-$round.txt" | tr -s ' ' | tr '\n' ' ')"
}

for round in $(seq "$ROUNDS"); do
  run_one ik 36002 x /tmp/llama-server -m "$GGUF" -t "$THREADS" -np 4 -c 16384 -rtr --port 36002
  run_one mxserve 36001 mxfp4 "$MXSERVE" serve "$CKPT" --port 36001
done
