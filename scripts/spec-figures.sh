#!/usr/bin/env bash
# Issue 29's figures: MTP speculative decoding off, at fixed draft steps, and `auto`, through
# the server: `mxserve bench single-stream` and `mxserve bench serve` at concurrency 1, 4 and 16,
# one fresh server per setting and round, the settings alternating within each round. Run it
# on a quiet host; prints one line per setting and round (output tok/s of each workload, and the
# seconds the MTP layer's passes took per second of target forwards) and keeps the reports in OUT.
#
#   scripts/spec-figures.sh MODEL_DIR [ROUNDS=2] [OUT=/tmp/spec-figures]
#
# SETTINGS (default "off 1 3 5 auto"), SERVE_OUT (output tokens per serve request, default 128),
# SS_OUT (single-stream output tokens, default 256), NP_FACTOR (serve requests per unit of
# concurrency, default 8), IN (prompt tokens, default 64), WARMUP (default 1: one unmeasured
# request per fresh server first; 0: none), ARGS
# (extra serve flags, e.g. --threads 2) override the defaults. The model needs a tokenizer.json
# (bench/model_bench writes one beside its bench-scale checkpoints); a synthetic one has no
# words to build text prompts from, so for those set VOCAB=32000 (random token ids; single-stream
# is then five requests one at a time through bench serve).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=$1
ROUNDS=${2:-2}
OUT=${3:-/tmp/spec-figures}
MXSERVE=${MXSERVE:-build/release/src/cli/mxserve}
SETTINGS=${SETTINGS:-off 1 3 5 auto}
SERVE_OUT=${SERVE_OUT:-128}
SS_OUT=${SS_OUT:-256}
IN=${IN:-64}
ARGS=${ARGS:-}
PORT=${PORT:-36101}
VOCAB=${VOCAB:-}  # set (e.g. 32000): token-id prompts in [0, VOCAB) instead of the tokenizer's words
WARMUP=${WARMUP:-1}  # 1: one unmeasured request per fresh server before the measured ones
mkdir -p "$OUT"

wait_ready() {  # pid
  for _ in $(seq 600); do
    if curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; then return 0; fi
    if ! kill -0 "$1" 2> /dev/null; then echo "server exited" >&2; return 1; fi
    sleep 0.5
  done
  echo "server not ready after 300 s" >&2
  return 1
}

# Output tok/s from a report: single-stream's median output speed, bench serve's throughput.
ss_rate() { grep -oE 'output speed [0-9.]+' "$1" | grep -oE '[0-9.]+$' || true; }
serve_rate() { grep -E '^Output token throughput' "$1" | grep -oE '[0-9.]+$' || true; }

for round in $(seq "$ROUNDS"); do
  for s in $SETTINGS; do
    spec=()
    case $s in
      off) ;;
      auto) spec=(--speculative-algorithm MTP) ;;
      *) spec=(--speculative-algorithm MTP --speculative-num-steps "$s") ;;
    esac
    if curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; then
      echo "port $PORT already serves something: stop it first" >&2
      exit 1
    fi
    # shellcheck disable=SC2086
    "$MXSERVE" serve "$MODEL" --port "$PORT" "${spec[@]}" $ARGS > "$OUT/server-$s-$round.log" 2>&1 &
    pid=$!
    trap 'kill $pid 2> /dev/null || true' EXIT
    wait_ready "$pid"
    base=http://127.0.0.1:$PORT
    name=$(basename "$MODEL")
    if [[ $WARMUP == 1 ]]; then
      # A fresh server's first request runs cold (buffers and weights touched for the first
      # time; under auto also the chooser's first probes): one unmeasured request first, the
      # same for every setting, as a server that has been up a while.
      warm=(--random-input-len "$IN" --random-output-len "$SS_OUT" --num-prompts 1 --seed 99)
      if [[ -n $VOCAB ]]; then warm+=(--random-vocab-size "$VOCAB"); else warm+=(--tokenizer "$MODEL"); fi
      "$MXSERVE" bench serve --base-url "$base" --model "$name" --endpoint completions "${warm[@]}" \
        --max-concurrency 1 > "$OUT/warmup-$s-$round.txt" 2>&1 || true
    fi
    if [[ -n $VOCAB ]]; then
      # No word tokens to build text from: five id prompts one at a time stand for single-stream.
      "$MXSERVE" bench serve --base-url "$base" --model "$name" --random-vocab-size "$VOCAB" \
        --endpoint completions --random-input-len "$IN" --random-output-len "$SS_OUT" \
        --num-prompts 5 --max-concurrency 1 --seed 7 > "$OUT/ss-$s-$round.txt" 2>&1 || true
      line="$s round $round: single-stream $(serve_rate "$OUT/ss-$s-$round.txt")"
      prompts=(--random-vocab-size "$VOCAB")
    else
      "$MXSERVE" bench single-stream --base-url "$base" --model "$name" --tokenizer "$MODEL" \
        --endpoint completions --input-len "$IN" --output-len "$SS_OUT" --runs 5 \
        > "$OUT/ss-$s-$round.txt" 2>&1 || true
      line="$s round $round: single-stream $(ss_rate "$OUT/ss-$s-$round.txt")"
      prompts=(--tokenizer "$MODEL")
    fi
    for c in 1 4 16; do
      "$MXSERVE" bench serve --base-url "$base" --model "$name" "${prompts[@]}" --endpoint completions \
        --random-input-len "$IN" --random-output-len "$SERVE_OUT" --num-prompts $((c * ${NP_FACTOR:-8})) \
        --max-concurrency "$c" --seed "$round" > "$OUT/serve-c$c-$s-$round.txt" 2>&1 || true
      line="$line, c$c $(serve_rate "$OUT/serve-c$c-$s-$round.txt")"
    done
    curl -s "$base/metrics" | grep -E '^mxserve:(spec_|forward_seconds)' > "$OUT/metrics-$s-$round.txt" || true
    # What the MTP layer's passes cost against the target forwards' time, over the whole run.
    share=$(awk '/^mxserve:spec_mtp_seconds_total/ {m = $2} /^mxserve:forward_seconds_total/ {f = $2}
                 END { if (f > 0) printf "%.3f", m / f }' "$OUT/metrics-$s-$round.txt")
    line="$line, mtp/forward ${share:-?}"
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    echo "$line"
  done
done
