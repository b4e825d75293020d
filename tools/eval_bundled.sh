#!/usr/bin/env bash
# Reproduces the accuracy table in models/glm-moe-dsa-arith-6m/MODEL_CARD.md: quantizes the
# bundled model to MXFP4, serves bf16 and MXFP4 in turn with `mxserve serve` (one worker
# thread, loopback, a free port), runs `mxserve eval arith` (all 500 held-out problems) and
# `mxserve eval gsm8k` (200 test questions, 5-shot, greedy) against each, and prints the
# `mxserve eval compare` table. Logs, summaries and the quantized checkpoint go to OUT_DIR.
#
#   tools/eval_bundled.sh [OUT_DIR]        (default /tmp/mxserve-eval-bundled)
#   MXSERVE_BIN=build/eval/src/cli/mxserve CONCURRENCY=2 tools/eval_bundled.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MXSERVE_BIN:-build/release/src/cli/mxserve}
OUT=${1:-/tmp/mxserve-eval-bundled}
C=${CONCURRENCY:-2}
MODEL=models/glm-moe-dsa-arith-6m
mkdir -p "$OUT"

"$BIN" quantize "$MODEL" "$OUT/mxfp4" --format mxfp4 --overwrite

serve() {  # serve DIR LOG -> sets PID and URL once /health answers
  "$BIN" --threads 1 serve "$1" --served-model-name arith --host 127.0.0.1 --port 0 >"$2" 2>&1 &
  PID=$!
  local port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$2" | head -1)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
    kill -0 "$PID" 2>/dev/null || { cat "$2"; exit 1; }
    sleep 0.2
  done
  URL="http://127.0.0.1:$port"
}

for variant in bf16 mxfp4; do
  dir=$MODEL
  [ "$variant" = mxfp4 ] && dir=$OUT/mxfp4
  serve "$dir" "$OUT/serve-$variant.log"
  "$BIN" eval arith --base-url "$URL" --model arith --concurrency "$C" \
    --output "$OUT/arith-$variant.jsonl"
  "$BIN" eval gsm8k --base-url "$URL" --model arith --data ../shared/datasets/gsm8k \
    --num-examples 200 --num-shots 5 --temperature 0 --max-tokens 256 --concurrency "$C" \
    --chat-template-kwargs '{"enable_thinking": false}' --output "$OUT/gsm8k-$variant.jsonl"
  kill "$PID"
  wait "$PID" || true
done

"$BIN" eval compare --base-label bf16 --quant-label MXFP4 --output-json "$OUT/compare.json" \
  "$OUT/arith-bf16.summary.json" "$OUT/arith-mxfp4.summary.json" \
  "$OUT/gsm8k-bf16.summary.json" "$OUT/gsm8k-mxfp4.summary.json" | tee "$OUT/compare.md"
