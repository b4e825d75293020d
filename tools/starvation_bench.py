#!/usr/bin/env python3
"""Decode starvation under a long prefill (issue 42): do running streams keep their pace
while a long prompt arrives, and does that prompt still finish promptly?

Against any OpenAI-compatible server taking token-id prompts on /v1/completions (mxserve
serve, llama-server). Standard library only. Three phases, all streamed:
  1. `--streams` requests decode (a short prompt, `--stream-tokens` output tokens with
     ignore_eos); their inter-token gaps over `--baseline-s` seconds are the baseline;
  2. a `--long-len`-token prompt (max_tokens 1) arrives while they decode: its TTFT, and the
     streams' gaps from its arrival to its first token;
  3. the streams are closed, and another long prompt of the same length (other ids, so no
     cache hit) runs alone: its TTFT.
Prints one JSON object: gap p50/p99 (ms) for phases 1 and 2, both TTFTs (s), and the ratios
the issue states its targets in (p99 during / p50 baseline, TTFT with / TTFT alone).

  python3 tools/starvation_bench.py --base-url http://127.0.0.1:30000 --long-len 6000

Start it once the server answers /health with 200 (/v1/models answers while the model loads);
streams that fail before the baseline end the run with their error.
"""
import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse


def percentile(xs, q):
    """numpy's linear percentile."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Stream(threading.Thread):
    """One streamed /v1/completions request; token arrival times in self.times."""

    def __init__(self, url, model, prompt, max_tokens):
        super().__init__(daemon=True)
        self.url, self.model, self.prompt, self.max_tokens = url, model, prompt, max_tokens
        self.times = []
        self.sent = None
        self.error = None
        self.conn = None
        self.stop = False

    def run(self):
        u = urllib.parse.urlparse(self.url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        body = json.dumps({"model": self.model, "prompt": self.prompt,
                           "max_tokens": self.max_tokens, "ignore_eos": True,
                           "temperature": 0, "stream": True})
        try:
            self.sent = time.monotonic()
            self.conn.request("POST", "/v1/completions", body,
                              {"Content-Type": "application/json"})
            resp = self.conn.getresponse()
            if resp.status != 200:
                self.error = f"http {resp.status}: {resp.read()[:200]!r}"
                return
            while not self.stop:
                line = resp.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("choices") and chunk["choices"][0].get("text"):
                    self.times.append(time.monotonic())
        except (OSError, http.client.HTTPException) as e:
            if not self.stop:
                self.error = repr(e)

    def close(self):
        self.stop = True
        if self.conn is not None and self.conn.sock is not None:
            try:
                self.conn.sock.shutdown(2)
            except OSError:
                pass

    def gaps_ms(self, t0, t1):
        """Gaps between consecutive tokens whose later token arrived in [t0, t1]."""
        return [(b - a) * 1e3 for a, b in zip(self.times, self.times[1:]) if t0 <= b <= t1]


def ids(rng, n, vocab):
    return [rng.randrange(100, vocab) for _ in range(n)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", default="http://127.0.0.1:30000")
    p.add_argument("--model", default="default")
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--stream-prompt-len", type=int, default=64)
    p.add_argument("--stream-tokens", type=int, default=4000)
    p.add_argument("--long-len", type=int, default=6000)
    p.add_argument("--vocab", type=int, default=32000, help="prompt ids in [100, vocab)")
    p.add_argument("--warmup-s", type=float, default=3.0)
    p.add_argument("--baseline-s", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)

    streams = [Stream(a.base_url, a.model, ids(rng, a.stream_prompt_len, a.vocab), a.stream_tokens)
               for _ in range(a.streams)]
    for s in streams:
        s.start()
    time.sleep(a.warmup_s)
    failed = [s.error for s in streams if s.error]
    if failed:  # e.g. 503 while the model loads: no baseline to measure against
        raise SystemExit(f"{len(failed)} of {a.streams} streams failed before the baseline: "
                         f"{failed[0]}")
    b0 = time.monotonic()
    time.sleep(a.baseline_s)
    b1 = time.monotonic()
    base = [g for s in streams for g in s.gaps_ms(b0, b1)]

    long_with = Stream(a.base_url, a.model, ids(rng, a.long_len, a.vocab), 1)
    long_with.start()
    long_with.join()
    during = [g for s in streams for g in s.gaps_ms(long_with.sent, long_with.times[0])] \
        if long_with.times else []
    alive = sum(1 for s in streams if s.is_alive())
    for s in streams:
        s.close()
    for s in streams:
        s.join(timeout=30)
    time.sleep(2.0)

    long_alone = Stream(a.base_url, a.model, ids(rng, a.long_len, a.vocab), 1)
    long_alone.start()
    long_alone.join()

    errors = [s.error for s in streams + [long_with, long_alone] if s.error]
    ttft_with = long_with.times[0] - long_with.sent if long_with.times else float("nan")
    ttft_alone = long_alone.times[0] - long_alone.sent if long_alone.times else float("nan")
    out = {
        "streams": a.streams, "long_len": a.long_len, "streams_alive_at_end": alive,
        "baseline_gap_ms": {"n": len(base), "p50": percentile(base, 50), "p99": percentile(base, 99)},
        "during_gap_ms": {"n": len(during), "p50": percentile(during, 50),
                          "p99": percentile(during, 99), "max": max(during, default=float("nan"))},
        "ttft_with_s": ttft_with, "ttft_alone_s": ttft_alone,
        "p99_during_over_p50_baseline": percentile(during, 99) / percentile(base, 50),
        "ttft_with_over_alone": ttft_with / ttft_alone,
        "errors": errors,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
