#!/usr/bin/env bash
# Runs every libFuzzer target (src/*/*_fuzz.cpp) for N seconds each, starting from a seed
# corpus of valid inputs plus the committed regression files.
#
#   scripts/fuzz.sh [SECONDS=60] [TARGET...]      e.g. scripts/fuzz.sh 300 safetensors_fuzz
#
# Builds with the `fuzz` preset (clang) into build/fuzz, instrumenting the libraries too
# (-fsanitize=fuzzer-no-link) so that libFuzzer sees coverage inside them. Corpora grow in
# build/fuzz-corpus/<target>/ (never in the repo); crashes land in
# build/fuzz-artifacts/<target>/. A crash should become a file in
# tests/fuzz-regressions/<area>/ plus a fix. Exits non-zero if any target failed.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-60}"
[[ $# -gt 0 ]] && shift
build="$root/build/fuzz"
corpus_root="$root/build/fuzz-corpus"
artifacts_root="$root/build/fuzz-artifacts"

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(cd "$root" && find src -name '*_fuzz.cpp' -printf '%f\n' | sed 's/\.cpp$//' | sort)
fi
[[ ${#targets[@]} -gt 0 ]] || { echo "fuzz.sh: no *_fuzz.cpp targets" >&2; exit 1; }

san="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
(cd "$root" && cmake --preset fuzz -DCMAKE_CXX_FLAGS="$san" >/dev/null)
cmake --build "$build" --target "${targets[@]}"

# Seeds: small valid files written here, so the corpus is never committed.
seeds_root="$corpus_root/seeds"
mkdir -p "$seeds_root"
python3 - "$seeds_root" "$root" <<'PY'
import json, os, struct, sys
out, root = sys.argv[1], sys.argv[2]
SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1, "U8": 1,
         "I8": 1, "I16": 2, "I32": 4, "I64": 8, "BOOL": 1}

def image(tensors, metadata=None):
    header, off = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape in sorted(tensors):
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + bytes(i % 251 for i in range(off))

d = os.path.join(out, "safetensors_fuzz")
os.makedirs(d, exist_ok=True)
seeds = {
    "empty": image([]),
    "all_dtypes": image([(f"t.{k}", k, [2, 1]) for k in SIZES], {"format": "pt"}),
    "scalar_and_empty": image([("s", "F32", []), ("e", "BF16", [0, 3]), ("w", "I8", [3])]),
    "glm_like": image([("model.layers.0.mlp.experts.0.down_proj.weight", "U8", [4, 2]),
                       ("model.layers.0.mlp.experts.0.down_proj.weight_scale", "U8", [4, 1]),
                       ("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", "BF16", [3, 4]),
                       ("lm_head.weight", "BF16", [2, 4])], {"format": "pt", "quant": "mxfp4"}),
}
# The bundled fixtures' real names and dtypes, with shapes shrunk to stay small.
for fx in ("tiny", "tiny-glm52"):
    p = os.path.join(root, "tests/data", fx, "model.safetensors")
    if os.path.exists(p):
        b = open(p, "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        hdr = json.loads(b[8:8 + n])
        md = hdr.pop("__metadata__", None)
        items = [(k, v["dtype"], [min(x, 2) for x in v["shape"]]) for k, v in sorted(hdr.items())[:12]]
        seeds["fixture_" + fx] = image(items, md)
for k, v in seeds.items():
    open(os.path.join(d, k), "wb").write(v)

d = os.path.join(out, "checkpoint_fuzz")
os.makedirs(d, exist_ok=True)
idx = {"metadata": {"total_size": 123}, "weight_map": {
    "a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}}
open(os.path.join(d, "index"), "w").write(json.dumps(idx, indent=2))
open(os.path.join(d, "index_compact"), "w").write(json.dumps(idx, separators=(",", ":")))
open(os.path.join(d, "no_metadata"), "w").write('{"weight_map":{"x":"m.safetensors"}}')

# HTTP requests with JSON bodies (src/server/http_request_fuzz.cpp).
d = os.path.join(out, "http_request_fuzz")
os.makedirs(d, exist_ok=True)
def req(head, body=b""):
    return head.encode() + (b"Content-Length: %d\r\n\r\n" % len(body)) + body
chat = json.dumps({"messages": [{"role": "user", "content": "1+1="}], "max_tokens": 8,
                   "stream": True, "tools": [{"type": "function", "function": {"name": "f",
                   "parameters": {"type": "object"}}}], "stop": ["\n"], "seed": 1}).encode()
gen = json.dumps({"text": "1+1=", "rid": "r", "sampling_params": {"max_new_tokens": 4,
                  "temperature": 0}}).encode()
seeds = {
    "chat": req("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", chat),
    "completion": req("POST /v1/completions HTTP/1.0\r\n", b'{"prompt":[1,2,3],"n":2,"echo":true}'),
    "generate": req("POST /generate HTTP/1.1\r\nExpect: 100-continue\r\n", gen),
    "chunked": b"POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\n{\"a\":\r\n3\r\n[1]\r\n1\r\n}\r\n0\r\n\r\n",
    "get": b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
    "pipelined": b"GET /health HTTP/1.1\r\n\r\n" + req("POST /abort_request HTTP/1.1\r\n",
                                                   b'{"abort_all":true}'),
}
for k, v in seeds.items():
    open(os.path.join(d, k), "wb").write(v)
PY

# A dictionary of tokens the header grammar uses.
dict="$corpus_root/safetensors.dict"
{
  for t in '{' '}' '[' ']' ':' ',' '"' '\\u' '\\ud800' '"dtype"' '"shape"' '"data_offsets"' \
           '"__metadata__"' '"weight_map"' '"metadata"' '"total_size"' '"F32"' '"BF16"' '"F16"' \
           '"F64"' '"F8_E4M3"' '"F8_E5M2"' '"U8"' '"I8"' '"I16"' '"I32"' '"I64"' '"BOOL"' \
           '-1' '1.5' '1e3' '18446744073709551615' '9223372036854775807' '4294967296' 'null' \
           'true' '..' '/' 'HTTP/1.1' 'HTTP/1.0' 'Content-Length: ' 'Transfer-Encoding: chunked' \
           'Content-Encoding: gzip' 'Expect: 100-continue' '"messages"' '"prompt"' \
           '"sampling_params"' '"stream"' '"tools"'; do
    printf '"%s"\n' "$(printf '%s' "$t" | sed 's/\\/\\\\/g; s/"/\\"/g')"
  done
} > "$dict"

status=0
for t in "${targets[@]}"; do
  exe="$(find "$build" -type f -name "$t" -perm -u+x | head -n 1)"
  [[ -n "$exe" ]] || { echo "fuzz.sh: $t was not built" >&2; status=1; continue; }
  corpus="$corpus_root/$t"
  artifacts="$artifacts_root/$t"
  mkdir -p "$corpus" "$artifacts" "$seeds_root/$t"
  extra=("$seeds_root/$t")
  area="${t%_fuzz}"
  [[ -d "$root/tests/fuzz-regressions/$area" ]] && extra+=("$root/tests/fuzz-regressions/$area")
  echo "== $t: ${secs}s, corpus $corpus"
  log="$artifacts_root/$t.log"
  set +e
  "$exe" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -dict="$dict" -artifact_prefix="$artifacts/" \
    "$corpus" "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|==[0-9]+==ERROR|SUMMARY|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
  if [[ $rc -ne 0 ]]; then  # libFuzzer exits non-zero on a crash, leak, timeout or OOM
    echo "fuzz.sh: $t FAILED; see $artifacts_root/$t.log and $artifacts/" >&2
    status=1
  else
    echo "== $t: ok ($(ls "$corpus" | wc -l) corpus files)"
  fi
done
exit $status
