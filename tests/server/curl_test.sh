#!/usr/bin/env bash
# The server driven by curl (and jq) alone, as an operator would: health, models, chat and
# completions (non-streaming text == streamed text at temperature 0), usage counts against
# /tokenize, cached_tokens on a repeated prompt, a parsed tool call shape, each error class
# with its status and OpenAI error JSON, /metrics moving, and SIGTERM exiting 0.
# Usage: curl_test.sh MXSERVE_BIN MODEL_DIR
set -uo pipefail
BIN=${1:?mxserve binary} MODEL=${2:?model dir}
fails=0 passes=0
check() {  # check NAME CONDITION-COMMAND...
  local name=$1
  shift
  if "$@"; then
    passes=$((passes + 1))
  else
    echo "FAIL: $name" >&2
    fails=$((fails + 1))
  fi
}
log=$(mktemp)
"$BIN" serve "$MODEL" --served-model-name arith --host 127.0.0.1 --port 0 --page-size 16 \
  --threads 1 >"$log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(grep -oE 'listening on http://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$' | head -1)
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "no listening line" >&2; cat "$log" >&2; exit 1; }
B=http://127.0.0.1:$port
for _ in $(seq 1 1200); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' $B/health)" = 200 ] && break
  sleep 0.1
done
post() { curl -s -H 'Content-Type: application/json' "$B$1" -d "$2"; }
code() { curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' "$B$1" -d "$2"; }

check "health 200" test "$(curl -s -o /dev/null -w '%{http_code}' $B/health)" = 200
check "models lists arith" test "$(curl -s $B/v1/models | jq -r '.data[0].id')" = arith

Q='Tom has 23 apples. He buys 45 more. How many apples does he have now?'
CHAT=$(jq -nc --arg q "$Q" '{messages:[{role:"user",content:$q}],max_tokens:40,temperature:0,
  chat_template_kwargs:{enable_thinking:false}}')
plain=$(post /v1/chat/completions "$CHAT")
text=$(jq -r '.choices[0].message.content' <<<"$plain")
check "chat has content" test -n "$text"
check "chat finish_reason" test "$(jq -r '.choices[0].finish_reason' <<<"$plain")" != null
streamed=$(post /v1/chat/completions "$(jq -c '.stream=true' <<<"$CHAT")" |
  sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -rj '.choices[0].delta.content // empty')
check "stream == non-stream (chat)" test "$streamed" = "$text"
check "stream ends with [DONE]" bash -c "curl -s -H 'Content-Type: application/json' $B/v1/chat/completions \
  -d '$(jq -c '.stream=true' <<<"$CHAT")' | grep -q '^data: \[DONE\]'"

# Completions: usage.prompt_tokens equals /tokenize's count; completion_tokens = max_tokens
# with ignore_eos; the same prompt again is served from the radix cache.
P='The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.'
COMP=$(jq -nc --arg p "$P" '{prompt:$p,max_tokens:12,temperature:0,ignore_eos:true}')
c1=$(post /v1/completions "$COMP")
n_prompt=$(post /tokenize "$(jq -nc --arg p "$P" '{prompt:$p}')" | jq -r '.count')
check "usage.prompt_tokens == /tokenize count" test "$(jq -r '.usage.prompt_tokens' <<<"$c1")" = "$n_prompt"
check "usage.completion_tokens == max_tokens" test "$(jq -r '.usage.completion_tokens' <<<"$c1")" = 12
check "usage.total_tokens" test "$(jq -r '.usage.total_tokens' <<<"$c1")" = $((n_prompt + 12))
c2=$(post /v1/completions "$COMP")
check "cached_tokens > 0 on a repeat" test "$(jq -r '.usage.prompt_tokens_details.cached_tokens' <<<"$c2")" -gt 0
check "same text on a repeat" test "$(jq -r '.choices[0].text' <<<"$c2")" = "$(jq -r '.choices[0].text' <<<"$c1")"
cs=$(post /v1/completions "$(jq -c '.stream=true' <<<"$COMP")" | sed -n 's/^data: //p' |
  grep -v '^\[DONE\]$' | jq -rj '.choices[0].text // empty')
check "stream == non-stream (completions)" test "$cs" = "$(jq -r '.choices[0].text' <<<"$c1")"

# Error classes: status and the OpenAI error object naming the parameter.
check "malformed JSON 400" test "$(code /v1/chat/completions '{"messages": [')" = 400
e=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"temperature":-3}')
check "out of range names the parameter" test "$(jq -r '.error.param' <<<"$e")" = temperature
check "error has type" test "$(jq -r '.error.type' <<<"$e")" != null
check "wrong type 400" test "$(code /v1/completions '{"prompt":"x","max_tokens":"many"}')" = 400
check "unknown model 404" test "$(code /v1/completions '{"model":"nope","prompt":"x"}')" = 404
check "context overflow 400" test "$(code /v1/completions '{"prompt":"x","max_tokens":100000000}')" = 400
check "unknown route 404" test "$(curl -s -o /dev/null -w '%{http_code}' $B/v1/nothing)" = 404

# A tool call request parses (the 6 M model rarely emits one: only the response shape is checked).
TOOLS='[{"type":"function","function":{"name":"add","parameters":{"type":"object",
  "properties":{"a":{"type":"number"},"b":{"type":"number"}}}}}]'
t=$(post /v1/chat/completions "$(jq -c --argjson t "$TOOLS" '.tools=$t' <<<"$CHAT")")
check "tools request answered" test "$(jq -r '.choices[0].message.role' <<<"$t")" = assistant

m=$(curl -s $B/metrics)
# The body goes in as data, never into the command line: its help texts may hold any character.
check "metrics counts generated tokens" grep -qE '^mxserve:generation_tokens_total\{model="arith"\} [1-9]' <<<"$m"
check "metrics counts cached tokens" grep -qE '^mxserve:cached_prompt_tokens_total\{model="arith"\} [1-9]' <<<"$m"
check "metrics counts forward seconds" grep -qE '^mxserve:forward_seconds_total\{model="arith"\} [0-9.e+-]*[1-9]' <<<"$m"

kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM exits 0" test "$rc" = 0
trap 'rm -f "$log"' EXIT
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
